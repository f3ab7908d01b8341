"""The `evolving` and `evolving_targets` sections of `tables` (issue 25): FAMA and stale memory.

Per evolving target and access mode (retrieve at the headline k: 5 when scored, else the smallest):
`present` = the `current_present` verdicts (one), `absent` = the `stale_absent` verdicts (one per
superseded version, in history order); P and F their counts, and as in Memora's released evaluator

    MPA = mean(present)    FAA = mean(absent) (1 when F = 0)    λ = F / (P + F)
    FAMA = max(0, MPA − λ·(1 − FAA))

Run level, per mode: each user's value is the mean over categories of the mean over that user's
evolving targets in the category (category-balanced, like B); the run's value is the mean over
users, with a user-bootstrap interval. `stale_in_recovery` = 1 − FAA (the share of superseded values
the reconstruction asserts) and `stale_in_store` = the share of superseded values the full final
store still holds as true (judged once per run, the same for every mode); both only over targets
with a superseded value. A criterion whose judgment failed is left out of its list. A store with no
evolving target gets neither section, so a static run's tables are what they were."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from statistics import mean

from memaudit.tables.columns import MODE, RUN, USERS, Column
from memaudit.types import CATEGORIES, DEFAULT_VARIANT, STORE_MODE

DEFAULT_K = 5
MEASURES = ("FAMA", "MPA", "FAA", "stale_in_store", "stale_in_recovery")
VERDICT_LISTS = ("present", "absent")  # the per-target criteria lists of `evolving_targets`

FAMA_DOC = ("FAMA, forgetting-aware memory accuracy (Memora's): max(0, MPA − λ·(1 − FAA)), λ = the share of "
            "superseded-value criteria among the target's criteria")
# What each measure is per target; the run's value is the category-balanced per-user mean.
MEASURE_DOCS = {
    "FAMA": FAMA_DOC,
    "MPA": "MPA, the accuracy on the present criterion: the reconstruction states the current value",
    "FAA": "FAA, the accuracy on the absent criteria: the share of superseded values the reconstruction does not "
           "assert (over targets with one)",
    "stale_in_store": "the share of superseded values the whole final store still holds as true (judged once per run, "
                      "the same in both modes)",
    "stale_in_recovery": "1 − FAA: the share of superseded values the reconstruction asserts",
}
MODE_ONLY = replace(MODE, extra=(), link=None)

EVOLVING = (
    RUN,
    MODE_ONLY,
    USERS,
    Column("targets", ("targets",), doc="evolving targets in this mode (a bank entry that changed inside the run)"),
    *(Column(f"{m} [95% CI]", (m,), "interval", ci_na=True, short=m,
             doc=f"{MEASURE_DOCS[m]}; per user the category-balanced mean over the user's evolving targets, then "
                 "the mean over users [95% user-bootstrap interval]") for m in MEASURES),
)

EVOLVING_TARGETS = (
    RUN,
    MODE_ONLY,
    Column("user", ("user",), "text", doc="the user"),
    Column("dimension", ("dimension",), "text", doc="the evolving bank entry"),
    Column("present", ("present",), "verdicts", doc="✓ when the reconstruction states the current value"),
    Column("absent", ("absent",), "verdicts",
           doc="one ✓/✗ per superseded value, oldest first: ✓ when the reconstruction does not assert it"),
    Column("FAMA", ("FAMA",), doc=f"{FAMA_DOC}, of this target"),
)


def fama(present: list[bool], absent: list[bool]) -> dict | None:
    """MPA, FAA, λ and FAMA of one target's criteria (None without a present criterion)."""
    p, f = len(present), len(absent)
    if p == 0:
        return None
    mpa = sum(present) / p
    faa = sum(absent) / f if f else 1.0
    lam = f / (p + f)
    return {"MPA": mpa, "FAA": faa, "lambda": lam, "FAMA": max(0.0, mpa - lam * (1 - faa))}


def _headline_k(judgments) -> dict[str, int]:
    ks: dict[str, set[int]] = defaultdict(set)
    for j in judgments:
        ks[j.mode].add(j.k)
    return {m: (DEFAULT_K if DEFAULT_K in found else min(found)) for m, found in ks.items() if m != STORE_MODE}


def target_rows(run: str, judgments) -> list[dict]:
    """One row per (mode, user, dimension) with its lists, FAMA and (internal) category and store list."""
    headline = _headline_k(judgments)
    lists: dict[tuple, dict] = {}
    store: dict[tuple, list[bool]] = defaultdict(list)
    for j in judgments:  # in key order: versions ascend
        if j.verdict is None:
            continue
        if j.mode == STORE_MODE:
            store[(j.user_id, j.dimension)].append(j.verdict)
        elif j.k == headline.get(j.mode):
            row = lists.setdefault((j.mode, j.user_id, j.dimension), {"category": j.category, "present": [],
                                                                       "absent": []})
            row["present" if j.criterion == "current_present" else "absent"].append(j.verdict)
    rows = []
    for mode in ("dump_all", "retrieve"):
        for (m, user, dim), found in sorted(lists.items()):
            if m != mode:
                continue
            scored = fama(found["present"], found["absent"])
            rows.append({"run": run, "mode": mode, "user": user, "dimension": dim, "present": found["present"],
                         "absent": found["absent"], "FAMA": None if scored is None else scored["FAMA"],
                         "_category": found["category"], "_scored": scored, "_store": store.get((user, dim), [])})
    return rows


def _per_target(row: dict) -> dict:
    scored = row["_scored"] or {}
    values = {"FAMA": scored.get("FAMA"), "MPA": scored.get("MPA"), "FAA": None, "stale_in_recovery": None,
              "stale_in_store": None}
    if row["absent"]:
        values["FAA"] = scored.get("FAA")
        values["stale_in_recovery"] = 1 - scored["FAA"] if scored else None
    if row["_store"]:
        values["stale_in_store"] = sum(row["_store"]) / len(row["_store"])
    return values


def user_values(rows: list[dict], measure: str) -> dict[str, float]:
    """user -> the category-balanced mean of a measure over the user's targets that have it."""
    by_user: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        value = _per_target(row)[measure]
        if value is not None:
            by_user[row["user"]][row["_category"]].append(value)
    return {user: mean(mean(cats[c]) for c in CATEGORIES if cats.get(c)) for user, cats in sorted(by_user.items())}


def run_rows(run: str, rows: list[dict], boot) -> list[dict]:
    out = []
    for mode in ("dump_all", "retrieve"):
        mode_rows = [r for r in rows if r["mode"] == mode]
        if not mode_rows:
            continue
        row = {"run": run, "mode": mode, "users": len({r["user"] for r in mode_rows}), "targets": len(mode_rows)}
        for measure in MEASURES:
            values = user_values(mode_rows, measure)
            row[measure] = float(mean(values.values())) if values else None
            row[f"{measure}_ci95"] = boot.ci(values.values()) if values else None
        out.append(row)
    return out


async def evolving_sections(store, runs: list[str], boot, variant: str = DEFAULT_VARIANT) -> dict:
    """{"evolving": [...], "evolving_targets": [...]}, or {} when no run has an evolving target."""
    evolving, targets = [], []
    for run in runs:
        rows = target_rows(run, await store.evolving.load([run], variant))
        evolving += run_rows(run, rows, boot)
        targets += [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
    return {"evolving": evolving, "evolving_targets": targets} if targets else {}

