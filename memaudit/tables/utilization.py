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
from dataclasses import replace

from memaudit.store import Store
from memaudit.tables import stats
from memaudit.tables.columns import DATA, RUN, SYSTEM, USERS, Column
from memaudit.types import CATEGORIES

COUNTS = ("kp_ap", "kp_af", "kf_ap", "kf_af")
COUNT_NAMES = {"kp_ap": "KP∧AP", "kp_af": "KP∧AF", "kf_ap": "KF∧AP", "kf_af": "KF∧AF"}
ORACLE_LABELS = ("retrieval", "comprehension", "application")  # memaudit/utilization/act.py assigns them

# One row per measured (run, k). The report links the run and each count to the pass's cases.
# KP/KF: Know passed/failed (the entry was recovered from top-k memory at the threshold or not);
# AP/AF: Act passed/failed (the answer to the Act scenario was shaped by the entry or not).
COUNT_DOCS = {"kp_ap": "entries known and used (K: Know, recovered from memory at the threshold; A: Act, the answer "
                       "to its scenario shaped by it; P pass, F fail)",
              "kp_af": "entries known, not used",
              "kf_ap": "entries used without being recovered (the memory surfaced them for the request though the "
                       "axis query did not)",
              "kf_af": "entries neither known nor used"}
UTILIZATION = (
    replace(RUN, link="cases"),
    SYSTEM,
    Column("k", ("k",), doc="memory items retrieved for the Know read and the Act answer"),
    Column("threshold", ("threshold",), outputs=DATA, doc="the recovery score at which an entry counts as known"),
    replace(USERS, outputs=DATA),
    Column("targets", ("targets",), doc="bank entries with an Act scenario, decided"),
    *(Column(name, (count,), link="cases", doc=COUNT_DOCS[count]) for count, name in COUNT_NAMES.items()),
    Column("Act accuracy", ("act_accuracy",), "interval",
           doc="per user AP / targets; mean over users [95% user-bootstrap interval]"),
    Column("Utilization", ("utilization",), "interval",
           doc="per user KP∧AP / KP (of the known entries, the share used); mean over users [95% interval]"),
    Column("per category", ("per_category",), outputs=DATA, doc="the figures per category"),
    Column("oracle retrieval/comprehension/application", tuple(f"oracle.{label}" for label in ORACLE_LABELS),
           doc="why a known entry was not used: retrieval (the answer passes once the disclosing user turns are "
               "put into its context: the evidence was not surfaced), comprehension (it passes once the value "
               "itself is: surfaced, not understood), application (neither helps)"),
    Column("oracle failed", ("oracle_failed",), outputs=DATA, doc="known entries the oracle could not classify"),
    Column("order disagreements", ("order_disagreements",),
           doc="entries whose two judge verdicts (answers in either order) disagreed: counted as not used"),
    Column("failed", ("failed",), doc="cases a call failed for: in no count"),
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

