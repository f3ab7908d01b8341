"""What the report reads from the store, through its repositories.

Per-user figures (metrics, B per pass) are read once for every selected run; the rows of single
targets (score, status, label) one pass at a time (`PassRows`); the heavy ones (transcripts,
retrieved items, attribution stages, memory dumps) one user at a time. The report's memory is
therefore bounded by one pass or one user, not by the study."""
from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from memaudit.errors import BadInput
from memaudit.store import Store, select_runs
from memaudit.tables.paper import RunData, run_data
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
    scored: dict = field(default_factory=dict)     # run -> users with a reconstruction in the run
    users: dict = field(default_factory=dict)      # bench -> [user ids, in benchmark order]
    _run_users: dict = field(default_factory=dict)
    _user_sets: dict = field(default_factory=dict)

    def run_users(self, run: dict) -> list[str]:
        """Users of the run's benchmark with an episode or a reconstruction in the run, in bench order."""
        if run["run"] not in self._run_users:
            present = set(self.metrics[run["run"]]) | self.scored[run["run"]]
            self._run_users[run["run"]] = [u for u in self.users[run["bench"]] if u in present]
        return self._run_users[run["run"]]

    def has_user(self, run: dict, uid: str) -> bool:
        if run["run"] not in self._user_sets:
            self._user_sets[run["run"]] = set(self.run_users(run))
        return uid in self._user_sets[run["run"]]

    def run_passes(self, run: str) -> list[Pass]:
        return [p for p in self.passes if p.run == run]

    def find_pass(self, run: str, mode: str, k: int | None) -> Pass | None:
        want = Pass(run, mode, 0 if mode == "dump_all" else k)
        return want if want in self.passes else None


class Target(NamedTuple):
    """One target of a pass, as the pass and list pages show it."""
    category: str
    score: float | None
    status: str
    label: str | None


NO_TARGET = Target("", None, "", "")


@dataclass
class PassRows:
    """The targets of one pass: user -> dimension -> Target, and user -> dimension -> attribution
    label. Tuples and shared strings: a pass holds every target of a run."""
    scores: dict
    labels: dict


async def pass_rows(store: Store, p: Pass) -> PassRows:
    scores: dict = {}
    async for r in store.scores.pass_rows(p.run, p.mode, p.k, VARIANT):
        scores.setdefault(r["user_id"], {})[sys.intern(r["dimension"])] = Target(
            sys.intern(r["category"]), r["score"], sys.intern(r["status"]), r["label"])
    labels: dict = {}
    async for r in store.attributions.pass_labels(p.run, p.mode, p.k, VARIANT):
        labels.setdefault(r["user_id"], {})[sys.intern(r["dimension"])] = sys.intern(r["label"])
    return PassRows(scores, labels)


async def report_runs(store: Store, runs: list[str] | None) -> list[dict]:
    """The report's runs (as run rows), sorted by id; every run when none is named."""
    if not await store.runs.names():
        raise BadInput("the store has no runs to report on; run `memaudit rollout` or `memaudit import-release` "
                       "first", file=str(store.path))
    chosen = sorted(r.run for r in await select_runs(store, runs or None))
    return [await store.runs.row(name) for name in chosen]


async def read_runs(store: Store, runs: list[dict]) -> list[RunData]:
    """What the tables are computed from, per run: read once, for the tables and the pages."""
    return [await run_data(store, info, VARIANT) for info in await select_runs(store, [r["run"] for r in runs])]


async def load_summary(store: Store, runs: list[dict], data: list[RunData]) -> Summary:
    """`data`: read_runs of the same runs (per-user metrics and recovery come from it)."""
    names = [r["run"] for r in runs]
    passes = [Pass(*key) for key in await store.scores.scored_modes(names, VARIANT)]
    summary = Summary(runs, passes)
    for d in data:
        summary.metrics[d.run] = d.users
        summary.scored[d.run] = set(await store.scores.scored_users(d.run, VARIANT))
        for (mode, k), rec in d.recovery.items():
            summary.recovery[Pass(d.run, mode, k)] = rec.users

    for bench in sorted({r["bench"] for r in runs}):
        summary.users[bench] = await store.benchmarks.user_ids(bench)
    return summary


async def load_user_detail(store: Store, runs: list[str], user_id: str) -> dict:
    """Transcripts, full reconstructions and attributions of one user across the selected runs."""
    recons: dict = defaultdict(list)
    for r in await store.scores.user_rows(runs, user_id, VARIANT):
        recons[r["dimension"]].append(r)
    return {"episodes": await store.episodes.user_transcripts(runs, user_id), "recons": recons,
            "attributions": await store.attributions.user_rows(runs, user_id, VARIANT)}

