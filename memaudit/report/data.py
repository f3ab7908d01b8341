"""What the report reads from the store, with plain SQL over the artifact schema.

Light rows (scores, labels, per-user episode counts) are read once for every selected run; the
heavy ones (transcripts, retrieved items, attribution stages, memory dumps) are read one user
at a time, so a 50-user × 5-system release never sits in memory at once."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from memaudit.errors import BadInput
from memaudit.scoring import metrics
from memaudit.scoring.tables import check_fresh
from memaudit.store import Store, loads

VARIANT = "default"


@dataclass(frozen=True)
class Pass:
    """One scoring pass of a run: an access mode at a k (k = 0 for dump_all)."""
    run: str
    mode: str
    k: int

    @property
    def name(self) -> str:
        return "dump_all" if self.mode == "dump_all" else f"{self.mode} k={self.k}"

    @property
    def slug(self) -> str:
        return "dump_all" if self.mode == "dump_all" else f"{self.mode}_k{self.k}"


@dataclass
class Summary:
    """Everything the index, run and user-grid pages need, for the selected runs."""
    runs: list[dict]
    passes: list[Pass]
    metrics: dict = field(default_factory=dict)    # run -> user -> metrics.UserMetrics
    recovery: dict = field(default_factory=dict)   # pass -> user -> metrics.UserRecovery
    scores: dict = field(default_factory=dict)     # pass -> user -> dimension -> {category, score, status, label}
    labels: dict = field(default_factory=dict)     # pass -> user -> dimension -> attribution label
    users: dict = field(default_factory=dict)      # bench -> [user rows with bank and tasks]

    def run_users(self, run: dict) -> list[str]:
        """Users of the run's benchmark with an episode or a reconstruction in the run, in bench order."""
        present = set(self.metrics[run["run"]])
        for p in self.run_passes(run["run"]):
            present |= set(self.scores[p])
        return [u["user_id"] for u in self.users[run["bench"]] if u["user_id"] in present]

    def run_passes(self, run: str) -> list[Pass]:
        return [p for p in self.passes if p.run == run]

    def find_pass(self, run: str, mode: str, k: int | None) -> Pass | None:
        want = Pass(run, mode, 0 if mode == "dump_all" else k)
        return want if want in self.scores else None


async def select_runs(store: Store, runs: list[str] | None) -> list[dict]:
    known = await store.list_runs()
    if not known:
        raise BadInput("the store has no runs to report on; run `memaudit rollout` or `memaudit import-release` "
                       "first", file=str(store.path))
    if not runs:
        return known
    by_name = {r["run"]: r for r in known}
    missing = [r for r in runs if r not in by_name]
    if missing:
        raise BadInput(f"unknown run(s) {', '.join(missing)}; the store has {', '.join(sorted(by_name)) or 'none'}",
                       file=str(store.path), field="runs")
    return [by_name[r] for r in sorted(set(runs))]


async def load_summary(store: Store, runs: list[dict]) -> Summary:
    names = [r["run"] for r in runs]
    marks = ",".join("?" * len(names))
    passes = [Pass(r["run"], r["mode"], r["k"]) for r in await store.fetchall(
        f"SELECT DISTINCT run, mode, k FROM reconstructions WHERE variant=? AND run IN ({marks}) "
        "ORDER BY run, mode, k", [VARIANT, *names])]
    summary = Summary(runs, passes, scores={p: {} for p in passes}, labels={p: {} for p in passes})
    for run in names:
        await check_fresh(store, run, VARIANT)
        summary.metrics[run] = await metrics.user_metrics(store, run)
        for (mode, k), rec in (await metrics.recovery(store, run, variant=VARIANT)).items():
            summary.recovery[Pass(run, mode, k)] = rec.users

    by_key = {(p.run, p.mode, p.k): p for p in passes}
    for r in await store.fetchall(
            "SELECT run, mode, k, user_id, category, dimension, score, status, label FROM reconstructions "
            f"WHERE variant=? AND run IN ({marks})", [VARIANT, *names]):
        summary.scores[by_key[(r["run"], r["mode"], r["k"])]].setdefault(r["user_id"], {})[r["dimension"]] = {
            "category": r["category"], "score": r["score"], "status": r["status"], "label": r["label"]}
    for r in await store.fetchall(
            f"SELECT run, mode, k, user_id, dimension, label FROM attributions WHERE variant=? AND run IN ({marks})",
            [VARIANT, *names]):
        p = by_key.get((r["run"], r["mode"], r["k"]))
        if p is not None:
            summary.labels[p].setdefault(r["user_id"], {})[r["dimension"]] = r["label"]

    for bench in sorted({r["bench"] for r in runs}):
        summary.users[bench] = await load_users(store, bench)
    return summary


async def load_users(store: Store, bench: str) -> list[dict]:
    bank, tasks = defaultdict(list), defaultdict(list)
    for r in await store.fetchall("SELECT * FROM bank_entries WHERE bench=? ORDER BY user_id, position", (bench,)):
        bank[r["user_id"]].append(dict(r))
    for r in await store.fetchall("SELECT * FROM tasks WHERE bench=? ORDER BY user_id, idx", (bench,)):
        tasks[r["user_id"]].append(dict(r))
    return [{"user_id": r["user_id"], "persona": loads(r["persona"]), "bank": bank[r["user_id"]],
             "tasks": tasks[r["user_id"]]}
            for r in await store.fetchall("SELECT * FROM users WHERE bench=? ORDER BY position", (bench,))]


async def load_user_detail(store: Store, runs: list[str], user_id: str) -> dict:
    """Transcripts, full reconstructions and attributions of one user across the selected runs."""
    marks = ",".join("?" * len(runs))
    episodes: dict = {}
    for r in await store.fetchall(f"SELECT * FROM episodes WHERE user_id=? AND run IN ({marks})", [user_id, *runs]):
        episodes[(r["run"], r["task_idx"])] = {**dict(r), "turns": []}
    for r in await store.fetchall(f"SELECT * FROM turns WHERE user_id=? AND run IN ({marks}) "
                                  "ORDER BY run, task_idx, turn", [user_id, *runs]):
        episodes[(r["run"], r["task_idx"])]["turns"].append(dict(r))
    recons: dict = defaultdict(list)
    for r in await store.fetchall(f"SELECT * FROM reconstructions WHERE variant=? AND user_id=? AND run IN ({marks}) "
                                  "ORDER BY run, mode, k", [VARIANT, user_id, *runs]):
        recons[r["dimension"]].append({**dict(r), "evidence": loads(r["evidence"])})
    attributions: dict = {}
    for r in await store.fetchall(f"SELECT * FROM attributions WHERE variant=? AND user_id=? AND run IN ({marks})",
                                  [VARIANT, user_id, *runs]):
        attributions[(r["run"], r["mode"], r["k"], r["dimension"])] = {**dict(r), "stages": loads(r["stages"])}
    return {"episodes": episodes, "recons": recons, "attributions": attributions}

