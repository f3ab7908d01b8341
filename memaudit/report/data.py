"""What the report reads from the store, through its repositories.

Light rows (scores, labels, per-user episode counts) are read once for every selected run; the
heavy ones (transcripts, retrieved items, attribution stages, memory dumps) are read one user
at a time, so a 50-user × 5-system release never sits in memory at once."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from memaudit.errors import BadInput
from memaudit.store import Store, select_runs
from memaudit.tables import metrics
from memaudit.tables.paper import check_fresh
from memaudit.types import DEFAULT_VARIANT

VARIANT = DEFAULT_VARIANT


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


async def report_runs(store: Store, runs: list[str] | None) -> list[dict]:
    """The report's runs (as run rows), sorted by id; every run when none is named."""
    if not await store.runs.names():
        raise BadInput("the store has no runs to report on; run `memaudit rollout` or `memaudit import-release` "
                       "first", file=str(store.path))
    chosen = sorted(r.run for r in await select_runs(store, runs or None))
    return [await store.runs.row(name) for name in chosen]


async def load_summary(store: Store, runs: list[dict]) -> Summary:
    names = [r["run"] for r in runs]
    passes = [Pass(*key) for key in await store.scores.scored_modes(names, VARIANT)]
    summary = Summary(runs, passes, scores={p: {} for p in passes}, labels={p: {} for p in passes})
    for run in names:
        await check_fresh(store, run, VARIANT)
        summary.metrics[run] = await metrics.user_metrics(store, run)
        for (mode, k), rec in (await metrics.recovery(store, run, variant=VARIANT)).items():
            summary.recovery[Pass(run, mode, k)] = rec.users

    by_key = {(p.run, p.mode, p.k): p for p in passes}
    for r in await store.scores.light_rows(names, VARIANT):
        summary.scores[by_key[(r["run"], r["mode"], r["k"])]].setdefault(r["user_id"], {})[r["dimension"]] = {
            "category": r["category"], "score": r["score"], "status": r["status"], "label": r["label"]}
    for r in await store.attributions.labels(names, VARIANT):
        p = by_key.get((r["run"], r["mode"], r["k"]))
        if p is not None:
            summary.labels[p].setdefault(r["user_id"], {})[r["dimension"]] = r["label"]

    for bench in sorted({r["bench"] for r in runs}):
        summary.users[bench] = await load_users(store, bench)
    return summary


async def load_users(store: Store, bench: str) -> list[dict]:
    return await store.benchmarks.user_rows(bench)


async def load_user_detail(store: Store, runs: list[str], user_id: str) -> dict:
    """Transcripts, full reconstructions and attributions of one user across the selected runs."""
    recons: dict = defaultdict(list)
    for r in await store.scores.user_rows(runs, user_id, VARIANT):
        recons[r["dimension"]].append(r)
    return {"episodes": await store.episodes.user_transcripts(runs, user_id), "recons": recons,
            "attributions": await store.attributions.user_rows(runs, user_id, VARIANT)}

