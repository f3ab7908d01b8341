"""Preference carry-over and bother rate, from what the rollout already recorded (no model call).

For each `assistance_preference` entry of a user, the episode where it was first disclosed is its
targeted episode: the disclosure judge of attribution reads only that episode, so no earlier
disclosure is on record. Every later episode of the run is a chance to carry the preference over:

- carry-over: the episode's first reply is rated >= 4 for this preference by the preference judge
  (the per-turn, per-preference ratings in `turns.per_pref`). The first reply comes before any user
  reply of the episode, so the user cannot have restated the preference. A first reply rated `na`
  (the preference cannot show in it) or left unrated (judge failure) is not a chance and is left out.
- bother: corrective feedback (correction, too_deep, too_shallow) from the simulated user, counted
  over all turns of the later episode (placeholder turns are not the user and do not count).

Per user: carry-over = honoured / rated (preference, later episode) pairs, bother = corrective
turns / (preference, later episode) pairs; the run's figures are the means over users with a
user-level bootstrap interval, and `carryover_vs_nomem` is the paired per-user difference from the
`nomem` run of the same benchmark. A run without per-preference records (an imported release
without pref_judge/) gets n/a for carry-over with the reason: a per-turn mean cannot say which
preference a reply honoured.
"""
from __future__ import annotations

from dataclasses import dataclass

from memaudit.store import Run, Store
from memaudit.tables import stats
from memaudit.tables.columns import RUN, SYSTEM, Column

CORRECTIVE = ("correction", "too_deep", "too_shallow")
HONOURED = 4
NO_RECORDS = ("no per-preference judgments recorded for this run (an imported release without pref_judge/); "
              "a per-turn mean cannot say which preference a reply honoured")
NO_LATER = "no episode of this run comes after a preference's targeted episode"

CARRYOVER = (
    RUN,
    SYSTEM,
    Column("prefs", ("prefs",), doc="assistance-preference entries with a later episode to carry them into"),
    Column("carry-over", ("carryover",), "interval",
           doc=f"per user, the share of (preference, later episode) pairs whose first reply the preference judge "
               f"rated {HONOURED} or above for that preference; mean over users [95% user-bootstrap interval]"),
    Column("bother rate", ("bother_rate", "bother_ci95"), "interval",
           doc="per user, corrective turns (correction, too_deep, too_shallow) per (preference, later episode) "
               "pair; mean over users [95% user-bootstrap interval]"),
    Column("carry-over − nomem [95% CI] p", ("carryover_vs_nomem",), "versus", short="carry-over − nomem",
           doc="the paired per-user difference from the nomem run of the same benchmark [95% interval] and its "
               "sign-flip p"),
    Column("note", ("na_reason",), "text", blank="", doc="why a figure is n/a"),
)


@dataclass
class UserCarryover:
    prefs: int = 0        # preferences with at least one later episode
    pairs: int = 0        # (preference, later episode) pairs
    rated: int = 0        # ... whose first reply has an integer rating for the preference
    honoured: int = 0     # ... rated >= HONOURED
    corrective: int = 0   # corrective feedback turns summed over the pairs

    @property
    def carryover(self) -> float | None:
        return self.honoured / self.rated if self.rated else None

    @property
    def bother(self) -> float | None:
        return self.corrective / self.pairs if self.pairs else None


def rating(turn_per_pref: list, position: int, dimension: str):
    """This preference's rating in one turn's per_pref records: matched by dimension where the
    record names it (ours), else by its 1-based position among the user's preferences (published)."""
    for record in turn_per_pref:
        if not isinstance(record, dict):
            continue
        if record.get("dimension") == dimension or ("dimension" not in record and record.get("idx") == position):
            return record.get("score")
    return None


def user_carryover(user: dict, episodes: dict[int, list[dict]]) -> UserCarryover:
    """One user's figures from the user's rows (Benchmarks.user_row) and the turns of the user's
    episodes (Episodes.feedback: task index -> turns, without their texts)."""
    out = UserCarryover()
    targeted = {t["target_dimension"]: t["idx"] for t in user["tasks"]}
    prefs = [e["dimension"] for e in user["bank"] if e["category"] == "assistance_preference"]
    for position, dimension in enumerate(prefs, 1):
        disclosed = targeted.get(dimension)
        if disclosed is None:
            continue
        later = [turns for idx, turns in episodes.items() if idx > disclosed and turns]
        out.prefs += bool(later)
        for turns in later:
            out.pairs += 1
            score = rating(turns[0]["per_pref"], position, dimension)
            if isinstance(score, int) and not isinstance(score, bool):
                out.rated += 1
                out.honoured += score >= HONOURED
            out.corrective += sum(t["feedback_type"] in CORRECTIVE and not t["fallback"] for t in turns)
    return out


async def runs_carryover(store: Store, runs: list[str]) -> dict[str, tuple[dict[str, UserCarryover] | None, str | None]]:
    """Per run: (per-user figures, None) or (None, why carry-over is not available for the run).
    Read one user at a time, without the transcripts' texts: memory stays that of one user. Runs of
    one benchmark share the user loop, so a user's bank and tasks are read once, not once per run."""
    by_bench: dict[str, list[str]] = {}
    for run in dict.fromkeys(runs):
        by_bench.setdefault((await store.runs.require(run)).bench, []).append(run)
    users: dict[str, dict[str, UserCarryover]] = {run: {} for run in runs}
    recorded: set[str] = set()
    for bench, bench_runs in by_bench.items():
        for user_id in await store.benchmarks.user_ids(bench):
            row = None
            for run in bench_runs:
                episodes = await store.episodes.feedback(run, user_id)
                if not episodes:
                    continue
                if any(t["per_pref"] for turns in episodes.values() for t in turns):
                    recorded.add(run)
                row = row or await store.benchmarks.user_row(bench, user_id)
                users[run][user_id] = user_carryover(row, episodes)
    return {run: (users[run], None) if run in recorded else (None, NO_RECORDS) for run in runs}


async def nomem_run(store: Store, run: Run) -> str | None:
    """The `nomem` run to pair with: same benchmark, the same tag if there is one, else the first."""
    found = [r for r in await store.runs.list() if r.system == "nomem" and r.bench == run.bench]
    same_tag = [r for r in found if r.config.tag == run.config.tag]
    chosen = same_tag or found
    return chosen[0].run if chosen else None


async def carryover_rows(store: Store, runs: list[str], boot) -> list[dict]:
    infos = {run: await store.runs.require(run) for run in runs}
    baselines = {run: await nomem_run(store, info) for run, info in infos.items()}
    # Read together: each user's rows once for every run, the nomem baselines once however many runs pair with them.
    figures = await runs_carryover(store, [*infos, *(b for b in baselines.values() if b is not None)])
    rows = []
    for run in runs:
        users, reason = figures[run]
        row = {"run": run, "system": infos[run].system, "prefs": None, "carryover": None, "carryover_ci95": None,
               "bother_rate": None, "bother_ci95": None, "carryover_vs_nomem": None, "na_reason": reason}
        if users is not None:
            carry = {u: f.carryover for u, f in users.items()}
            bother = {u: f.bother for u, f in users.items()}
            row["na_reason"] = None if any(f.pairs for f in users.values()) else NO_LATER
            row.update(prefs=sum(f.prefs for f in users.values()),
                       carryover=stats.mean_std(carry.values())[0], carryover_ci95=boot.ci(carry.values()),
                       bother_rate=stats.mean_std(bother.values())[0], bother_ci95=boot.ci(bother.values()))
            row["carryover_vs_nomem"] = _versus_nomem(run, baselines[run], carry, boot, figures)
        rows.append(row)
    return rows


def _versus_nomem(run: str, baseline: str | None, carry: dict, boot, figures: dict) -> dict | None:
    if baseline is None or baseline == run:
        return None
    users, _ = figures[baseline]
    if users is None:
        return None
    paired, diffs = stats.paired_diffs(carry, {u: f.carryover for u, f in users.items()})
    if not paired:
        return None
    ci, p = boot.paired(diffs)
    return {"nomem": baseline, "users": len(paired), "diff": float(diffs.mean()), "ci95": ci, "p": p}

