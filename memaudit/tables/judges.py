"""The `judges` section of the tables (`tables --format json`, md, latex, the HTML report): the
panel, its agreement, and per judge B, control-answer rates and flag, test–retest and agreement
with human grades. Built here, once; the tables code only calls `judges_section`.

A run scored by one judge (every run scored without --judges, every imported published run) has
no agreement to report: `agreement` is null and `agreement_reason` says why."""
from __future__ import annotations

import math

import numpy as np

from memaudit.tables import agreement
from memaudit.tables.judge_checks import check_summary
from memaudit.tables.metrics import user_recovery
from memaudit.store import Run, Store
from memaudit.types import CATEGORIES, DEFAULT_VARIANT

HEADLINE_K = 5
RECORDED_JUDGE = "recorded judge"  # an imported run's judge: the release does not name its model


async def judges_section(store: Store, runs: list[Run], *, resamples: int, seed: int = 0) -> dict | None:
    """None when the runs have no scored target and their benchmarks no judge-check."""
    ids = [r.run for r in runs]
    rows = [dict(r) for r in await store.judges.targets(ids, DEFAULT_VARIANT)] if ids else []
    checks = await check_summary(store, sorted({r.bench for r in runs})) if runs else None
    if not rows and checks is None:
        return None
    singles = {r.run: await _single_judge(store, r) for r in runs}
    verdicts = [dict(v) for v in await store.judges.verdicts(ids, DEFAULT_VARIANT)] if ids else []
    scored = {r["run"] for r in rows}
    paneled = {v["run"] for v in verdicts}
    configured = [j for r in ids for j in await _panel_of(store, r)]
    panel = list(dict.fromkeys([*configured, *(v["judge"] for v in verdicts),
                                *(singles[r] for r in ids if r in scored and r not in paneled)]))
    scores = judge_scores(rows, verdicts, singles, panel)
    section = {"panel": panel, **_agreement(panel, scores, verdicts, runs, resamples, seed)}
    grades = [dict(g) for g in await store.judges.grades(ids)] if ids else []
    judges = list(dict.fromkeys([*panel, *((checks or {}).get("judges") or {})]))
    section["per_judge"] = [_per_judge(name, rows, scores.get(name, {}), verdicts, checks, grades) for name in judges]
    section["panel_human"] = _human({_key(r): r["score"] for r in rows if r["status"] == "ok"}, grades)
    section["checks"] = None if checks is None else checks["thresholds"]
    return section


async def _panel_of(store: Store, run: str) -> list[str]:
    """The judges of the run's default panel passes, in panel order."""
    return [j for p in await store.scores.passes(run, DEFAULT_VARIANT) for j in p.config.scorer.get("judges", [])]


async def _single_judge(store: Store, run: Run) -> str:
    """The name of a run's one judge: the recovery judge model of its default pass."""
    if run.origin == "import":
        return RECORDED_JUDGE
    for p in await store.scores.passes(run.run, DEFAULT_VARIANT):
        if p.config.scorer.get("judge_model"):
            return p.config.scorer["judge_model"]
    return RECORDED_JUDGE


def _key(row: dict) -> tuple:
    return (row["run"], row["mode"], row["k"], row["user_id"], row["dimension"])


def judge_scores(rows: list[dict], verdicts: list[dict], singles: dict, panel: list[str]) -> dict[str, dict]:
    """judge -> target -> score (None: the judge was dropped). A panel run's judges speak through
    their repeat-0 verdicts; a one-judge run's judge through the row itself."""
    out: dict[str, dict] = {name: {} for name in panel}
    for v in verdicts:
        if v["repeat"] == 0:
            out[v["judge"]][_key(v)] = v["score"] if v["status"] == "ok" else None
    paneled = {v["run"] for v in verdicts}
    for r in rows:
        if r["run"] not in paneled and r["status"] == "ok":
            out[singles[r["run"]]][_key(r)] = r["score"]
    return out


def _agreement(panel: list[str], scores: dict, verdicts: list[dict], runs: list[Run], resamples: int,
               seed: int) -> dict:
    targets = sorted({_key(v) for v in verdicts if v["repeat"] == 0})
    if len(panel) < 2 or not targets:
        imported = any(r.origin == "import" for r in runs)
        why = ("one judge: an imported published run records the scores of its one judge only" if imported
               else "one judge: score with --judges M1,M2,M3 (an odd panel) to measure agreement")
        return {"agreement": None, "agreement_reason": why}
    category = {_key(v): v["category"] for v in verdicts}
    matrix = np.array([[_nan(scores[name].get(t)) for t in targets] for name in panel], dtype=float)
    users = [(t[0], t[3]) for t in targets]
    found = agreement.panel_agreement(matrix, panel, users, resamples=resamples, seed=seed)
    found["alpha_by_category"] = {c: agreement.alpha_ordinal(matrix[:, [i for i, t in enumerate(targets)
                                                                        if category[t] == c]])
                                  for c in CATEGORIES}
    return {"agreement": found, "agreement_reason": None}


def _nan(score: float | None) -> float:
    return math.nan if score is None else score


def _per_judge(name: str, rows: list[dict], mine: dict, verdicts: list[dict], checks: dict | None,
               grades: list[dict]) -> dict:
    checked = ((checks or {}).get("judges") or {}).get(name)
    out = {"model": name, **_recovery(rows, mine),
           "positive_pass": None, "negative_false_pass": None, "flag": None,
           "retest_changed": _retest(name, verdicts, checked), "human": _human(
               {t: s for t, s in mine.items() if s is not None}, grades),
           "dropped": sum(1 for v in verdicts if v["judge"] == name and v["repeat"] == 0 and v["status"] != "ok")}
    if checked is not None:
        out.update({k: checked[k] for k in ("positive_pass", "positive_pass_ci95", "negative_false_pass",
                                             "negative_false_pass_ci95", "flag")})
    return out


def _recovery(rows: list[dict], mine: dict) -> dict:
    """B under this judge (dump_all, and retrieve at k = 5 or the smallest k scored), as the mean
    over every (run, user): the judge's score where it judged, the row's own where no judge was
    asked (unknown labels, overflow); a target the judge was dropped from is left out, counted."""
    if not mine:
        return {"B_dump_all": None, "B_retrieve": None}
    users: dict = {}
    judged_runs = {t[0] for t in mine}
    for r in rows:
        if r["run"] not in judged_runs:
            continue
        key = _key(r)
        score, status = r["score"], r["status"]
        if key in mine:
            score, status = mine[key], ("ok" if mine[key] is not None else "failed")
        users.setdefault((r["mode"], r["run"], r["k"]), {}).setdefault(r["user_id"], []).append(
            (r["category"], score, status))
    out = {}
    for mode in ("dump_all", "retrieve"):
        values = []
        for run in sorted(judged_runs):
            ks = sorted(k for m, r, k in users if m == mode and r == run)
            if ks:
                k = HEADLINE_K if HEADLINE_K in ks else ks[0]
                values += [user_recovery(u, rs).B for u, rs in sorted(users[(mode, run, k)].items())]
        values = [v for v in values if v is not None]
        out[f"B_{mode}"] = sum(values) / len(values) if values else None
    return out


def _retest(name: str, verdicts: list[dict], checked) -> float | None:
    groups: dict = {}
    for v in verdicts:
        if v["judge"] == name and v["status"] == "ok":
            groups.setdefault(_key(v), []).append(v["score"])
    found = agreement.retest(list(groups.values()))
    if checked is not None and checked.get("retest_targets"):
        n = found["targets"] + checked["retest_targets"]
        changed = (found["changed"] or 0) * found["targets"] + checked["retest_changed"] * checked["retest_targets"]
        return changed / n
    return found["changed"]


def _human(judged: dict, grades: list[dict]) -> dict | None:
    """Agreement of a rater's scores (target -> score) with every human grade of those targets."""
    pairs = [(judged[t], g["score"]) for g in grades if (t := _key(g)) in judged]
    if not pairs:
        return None
    found = agreement.pair_agreement([a for a, _ in pairs], [b for _, b in pairs])
    return {k: found[k] for k in ("kappa_quadratic", "exact", "within_one", "n")}
