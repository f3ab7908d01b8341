"""What judge-check's stored verdicts say (memaudit/scoring/judge_check.py writes them): per judge and
category, the positive pass rate and the negative false-pass rate with Wilson intervals, a
`lenient`/`harsh` flag, and test–retest over repeats. Reads the store only."""
from __future__ import annotations

from dataclasses import dataclass

from memaudit.tables.agreement import rate, retest
from memaudit.types import CATEGORIES, RUBRIC

# kind -> the lowest score that passes (positives): the truth at the top level, a paraphrase where a
# target counts as recovered. Negatives false-pass at FALSE_PASS or above: one level below recovered.
POSITIVES = {"truth": RUBRIC.top, "paraphrase": RUBRIC.recovered}
NEGATIVES = ("other_user", "non_answer", "reversed")
KINDS = (*POSITIVES, *NEGATIVES)
FALSE_PASS = RUBRIC.below(RUBRIC.recovered)
MAX_FALSE_PASS = 0.10
MIN_PASS = 0.90


@dataclass(frozen=True)
class Thresholds:
    max_false_pass: float = MAX_FALSE_PASS
    min_pass: float = MIN_PASS


def passed(kind: str, score: float) -> bool:
    """A positive passes at its level; a negative 'passes' (falsely) at FALSE_PASS or above."""
    return score >= POSITIVES[kind] if kind in POSITIVES else score >= FALSE_PASS


def control_rates(rows) -> dict:
    """Positive pass rate and negative false-pass rate with Wilson intervals, from repeat-0
    verdicts; failed verdicts are counted, not rated."""
    first = [r for r in rows if r["repeat"] == 0]
    valid = [r for r in first if r["status"] == "ok"]
    pos = [passed(r["kind"], r["score"]) for r in valid if r["kind"] in POSITIVES]
    neg = [passed(r["kind"], r["score"]) for r in valid if r["kind"] not in POSITIVES]
    positive, positive_ci = rate(sum(pos), len(pos))
    false_pass, false_ci = rate(sum(neg), len(neg))
    return {"positive_pass": positive, "positive_pass_ci95": positive_ci, "positives": len(pos),
            "negative_false_pass": false_pass, "negative_false_pass_ci95": false_ci, "negatives": len(neg),
            "failed": len(first) - len(valid)}


def flag(rates: dict, thresholds: Thresholds) -> str | None:
    """`lenient` (false passes above the limit), `harsh` (positives passed below the floor), both,
    `ok`, or None when nothing was checked."""
    if rates["positive_pass"] is None and rates["negative_false_pass"] is None:
        return None
    found = []
    if rates["negative_false_pass"] is not None and rates["negative_false_pass"] > thresholds.max_false_pass:
        found.append("lenient")
    if rates["positive_pass"] is not None and rates["positive_pass"] < thresholds.min_pass:
        found.append("harsh")
    return "+".join(found) or "ok"


async def check_summary(store, benches: list[str], thresholds: Thresholds | None = None) -> dict | None:
    """Per judge: rates, flag and per-category rates over every stored control verdict of the
    benches; thresholds default to those of the last recorded check. None when nothing was checked."""
    checks = await store.judges.checks(benches)
    rows = [dict(r) for r in await store.judges.control_verdicts(benches)]
    if not checks or not rows:
        return None
    if thresholds is None:
        last = checks[-1]["config"]
        thresholds = Thresholds(last.get("max_false_pass", MAX_FALSE_PASS), last.get("min_pass", MIN_PASS))
    judges = list(dict.fromkeys(j for c in checks for j in c["config"].get("judges", [])))
    judges += sorted({r["judge"] for r in rows} - set(judges))
    out = {}
    for judge in judges:
        mine = [r for r in rows if r["judge"] == judge]
        rates = control_rates(mine)
        groups: dict = {}
        for r in mine:
            if r["status"] == "ok":
                groups.setdefault((r["bench"], r["user_id"], r["dimension"], r["kind"]), []).append(r["score"])
        again = retest(list(groups.values()))
        out[judge] = {**rates, "flag": flag(rates, thresholds), "retest_changed": again["changed"],
                      "retest_mean_abs_change": again["mean_abs_change"], "retest_targets": again["targets"],
                      "categories": {c: control_rates([r for r in mine if r["category"] == c]) for c in CATEGORIES}}
    return {**no_checks(thresholds), "judges": out}


def no_checks(thresholds: Thresholds) -> dict:
    """A check summary without verdicts: the thresholds it would flag with, no judge."""
    return {"thresholds": {"max_false_pass": thresholds.max_false_pass, "min_pass": thresholds.min_pass},
            "judges": {}}
