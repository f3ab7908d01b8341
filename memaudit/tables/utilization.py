"""The `utilization` rows of `tables` (read from `act_cases`; no model is contacted).

Every decided case (status ok, Know known) lands in exactly one of four counts:
KP∧AP (known and used), KP∧AF (known, not used), KF∧AP (used without being recovered: the memory
surfaced it for the request though the axis query did not), KF∧AF. A `disagree` is not a pass (AF)
and is also counted in `order_disagreements`. Failed cases are counted in `failed`, never in the
four counts.

Rates follow the user-is-the-unit rule of every memaudit table: per user first (Act accuracy =
AP / targets, Utilization Rate = KP∧AP / KP over the user's known entries), then the mean over
users, with a user-level bootstrap interval. The counts are totals, so KP∧AP / KP of the totals
can differ slightly from the mean of per-user rates.
"""
from __future__ import annotations

from collections import defaultdict

from memaudit.store import Store
from memaudit.tables import stats
from memaudit.tables.columns import DATA, NOT_TEXT, Column
from memaudit.types import CATEGORIES

COUNTS = ("kp_ap", "kp_af", "kf_ap", "kf_af")
COUNT_NAMES = {"kp_ap": "KP∧AP", "kp_af": "KP∧AF", "kf_ap": "KF∧AP", "kf_af": "KF∧AF"}
ORACLE_LABELS = ("retrieval", "comprehension", "application")  # memaudit/utilization/act.py assigns them

# One row per measured (run, k). The report links the run and each count to the pass's cases.
UTILIZATION = (
    Column("run", ("run",), "run", link="cases"),
    Column("system", ("system",), "text", outputs=NOT_TEXT),
    Column("k", ("k",)),
    Column("threshold", ("threshold",), outputs=DATA),
    Column("users", ("users",), outputs=DATA),
    Column("targets", ("targets",)),
    *(Column(name, (count,), link="cases") for count, name in COUNT_NAMES.items()),
    Column("Act accuracy", ("act_accuracy",), "interval"),
    Column("Utilization", ("utilization",), "interval"),
    Column("per category", ("per_category",), outputs=DATA),
    Column("oracle retrieval/comprehension/application", tuple(f"oracle.{label}" for label in ORACLE_LABELS)),
    Column("oracle failed", ("oracle_failed",), outputs=DATA),
    Column("order disagreements", ("order_disagreements",)),
    Column("failed", ("failed",)),
)


def outcome(know: bool, act: str) -> str:
    return ("kp_" if know else "kf_") + ("ap" if act == "pass" else "af")


def _rates(cases: list[dict]) -> tuple[dict, dict]:
    """Per-user (Act accuracy, Utilization Rate); a user without known entries has no utilization."""
    by_user: dict[str, list[dict]] = defaultdict(list)
    for c in cases:
        by_user[c["user_id"]].append(c)
    accuracy, utilization = {}, {}
    for user, found in sorted(by_user.items()):
        accuracy[user] = sum(c["act"] == "pass" for c in found) / len(found)
        known = [c for c in found if c["know"]]
        if known:
            utilization[user] = sum(c["act"] == "pass" for c in known) / len(known)
    return accuracy, utilization


def _block(cases: list[dict], boot) -> dict:
    counts = {name: 0 for name in COUNTS}
    for c in cases:
        counts[outcome(c["know"], c["act"])] += 1
    accuracy, utilization = _rates(cases)
    return {"targets": len(cases), **counts,
            "act_accuracy": stats.mean_std(accuracy.values())[0], "act_accuracy_ci95": boot.ci(accuracy.values()),
            "utilization": stats.mean_std(utilization.values())[0],
            "utilization_ci95": boot.ci(utilization.values())}


async def load_cases(store: Store, run: str, k: int) -> list[dict]:
    return await store.utilization.cases(run, k)


async def utilization_rows(store: Store, runs: list[str], boot) -> list[dict]:
    """One row per measured (run, k); `boot` is the tables' Bootstrap (resamples and seed)."""
    rows = []
    for run in runs:
        info = await store.runs.require(run)
        for k, config in await store.utilization.passes(run):
            cases = await load_cases(store, run, k)
            decided = [c for c in cases if c["status"] == "ok" and c["know"] is not None]
            row = {"run": run, "system": info.system, "k": k,
                   "threshold": config["threshold"],
                   "users": len({c["user_id"] for c in decided}), **_block(decided, boot)}
            row["per_category"] = {cat: _block([c for c in decided if c["category"] == cat], boot)
                                   for cat in CATEGORIES}
            row["oracle"] = {label: sum(c["oracle"] == label for c in decided) for label in ORACLE_LABELS}
            row["oracle_failed"] = sum(1 for c in decided if c["know"] and c["act"] != "pass" and c["oracle"] is None)
            row["order_disagreements"] = sum(c["act"] == "disagree" for c in decided)
            row["failed"] = len(cases) - len(decided)
            rows.append(row)
    return rows

