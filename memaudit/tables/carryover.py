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
from memaudit.tables.utilization import with_ci
from memaudit.types import Benchmark, Episode, User

CORRECTIVE = ("correction", "too_deep", "too_shallow")
HONOURED = 4
NO_RECORDS = ("no per-preference judgments recorded for this run (an imported release without pref_judge/); "
              "a per-turn mean cannot say which preference a reply honoured")
NO_LATER = "no episode of this run comes after a preference's targeted episode"


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


def user_carryover(bench: Benchmark, user: User, episodes: list[Episode]) -> UserCarryover:
    out = UserCarryover()
    targeted = {t.target_dimension: t.index for t in bench.tasks.get(user.id, ())}
    for position, pref in enumerate(user.entries("assistance_preference"), 1):
        disclosed = targeted.get(pref.dimension)
        if disclosed is None:
            continue
        later = [e for e in episodes if e.task_index > disclosed and e.turns]
        out.prefs += bool(later)
        for episode in later:
            out.pairs += 1
            score = rating(episode.turns[0].per_pref, position, pref.dimension)
            if isinstance(score, int) and not isinstance(score, bool):
                out.rated += 1
                out.honoured += score >= HONOURED
            out.corrective += sum(t.feedback_type in CORRECTIVE and not t.fallback for t in episode.turns)
    return out


def has_records(episodes: list[Episode]) -> bool:
    return any(t.per_pref for e in episodes for t in e.turns)


async def run_carryover(store: Store, run: str) -> tuple[dict[str, UserCarryover] | None, str | None]:
    """(per-user figures, None) or (None, why carry-over is not available for the run)."""
    bench = await store.benchmarks.load((await store.runs.require(run)).bench)
    episodes = await store.episodes.load(run)
    if not has_records(episodes):
        return None, NO_RECORDS
    by_user: dict[str, list[Episode]] = {}
    for e in episodes:
        by_user.setdefault(e.user_id, []).append(e)
    return {u.id: user_carryover(bench, u, by_user[u.id]) for u in bench.users if u.id in by_user}, None


async def nomem_run(store: Store, run: Run) -> str | None:
    """The `nomem` run to pair with: same benchmark, the same tag if there is one, else the first."""
    found = [r for r in await store.runs.list() if r.system == "nomem" and r.bench == run.bench]
    same_tag = [r for r in found if r.config.tag == run.config.tag]
    chosen = same_tag or found
    return chosen[0].run if chosen else None


async def carryover_rows(store: Store, runs: list[str], boot) -> list[dict]:
    rows = []
    for run in runs:
        info = await store.runs.require(run)
        users, reason = await run_carryover(store, run)
        row = {"run": run, "system": info.system, "prefs": None, "carryover": None, "carryover_ci95": None,
               "bother_rate": None, "bother_ci95": None, "carryover_vs_nomem": None, "na_reason": reason}
        if users is not None:
            carry = {u: f.carryover for u, f in users.items()}
            bother = {u: f.bother for u, f in users.items()}
            row["na_reason"] = None if any(f.pairs for f in users.values()) else NO_LATER
            row.update(prefs=sum(f.prefs for f in users.values()),
                       carryover=stats.mean_std(carry.values())[0], carryover_ci95=boot.ci(carry.values()),
                       bother_rate=stats.mean_std(bother.values())[0], bother_ci95=boot.ci(bother.values()))
            row["carryover_vs_nomem"] = await _versus_nomem(store, info, carry, boot)
        rows.append(row)
    return rows


async def _versus_nomem(store: Store, info: Run, carry: dict, boot) -> dict | None:
    baseline = await nomem_run(store, info)
    if baseline is None or baseline == info.run:
        return None
    users, _ = await run_carryover(store, baseline)
    if users is None:
        return None
    paired, diffs = stats.paired_diffs(carry, {u: f.carryover for u, f in users.items()})
    if not paired:
        return None
    ci, p = boot.paired(diffs)
    return {"nomem": baseline, "users": len(paired), "diff": float(diffs.mean()), "ci95": ci, "p": p}


def table(rows: list[dict], num, ci) -> tuple[list[str], list[list[str]]]:
    header = ["run", "prefs", "carry-over", "bother rate", "carry-over − nomem [95% CI] p", "note"]
    body = []
    for r in rows:
        versus = r["carryover_vs_nomem"]
        body.append([r["run"], num(r["prefs"]), with_ci(r["carryover"], r["carryover_ci95"], num, ci),
                     with_ci(r["bother_rate"], r["bother_ci95"], num, ci),
                     "n/a" if versus is None else f"{num(versus['diff'])} {ci(versus['ci95'])} p={num(versus['p'], 4)}",
                     r["na_reason"] or ""])
    return header, body
