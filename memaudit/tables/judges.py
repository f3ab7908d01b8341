"""The `judges` section of the tables (`tables --format json`, md, latex, the HTML report): the
panel, its agreement, and per judge B, control-answer rates and flag, test–retest and agreement
with human grades. Built here, once; the tables code only calls `judges_section`.

A run scored by one judge (every run scored without --judges, every imported published run) has
no agreement to report: `agreement` is null and `agreement_reason` says why."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

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
    checks = await check_summary(store, sorted({r.bench for r in runs})) if runs else None
    singles = {r.run: await _single_judge(store, r) for r in runs}
    verdicts = [dict(v) for v in await store.judges.verdicts(ids, DEFAULT_VARIANT)] if ids else []
    grades = [dict(g) for g in await store.judges.grades(ids)] if ids else []
    found = await _run_targets(store, ids, verdicts, singles, {_key(g) for g in grades})
    if not found.scored and checks is None:
        return None
    paneled = {v["run"] for v in verdicts}
    configured = [j for r in ids for j in await _panel_of(store, r)]
    panel = list(dict.fromkeys([*configured, *(v["judge"] for v in verdicts),
                                *(singles[r] for r in ids if r in found.scored and r not in paneled)]))
    scores = judge_scores(found.graded_rows, verdicts, singles, panel)
    section = {"panel": panel, **_agreement(panel, scores, verdicts, runs, resamples, seed)}
    judges = list(dict.fromkeys([*panel, *((checks or {}).get("judges") or {})]))
    section["per_judge"] = [_per_judge(name, found.recovery.get(name), scores.get(name, {}), verdicts, checks, grades)
                            for name in judges]
    section["panel_human"] = _human({_key(r): r["score"] for r in found.graded_rows if r["status"] == "ok"}, grades)
    section["checks"] = None if checks is None else checks["thresholds"]
    return section


@dataclass
class _Targets:
    """What the section needs of the runs' scored targets, folded one user at a time as they are
    read (a study's targets held at once grew the tables' memory with the users): the runs with a
    target, each judge's per-user B per run and pass (`_headline`), and the rows a person graded."""
    scored: set = field(default_factory=set)
    recovery: dict = field(default_factory=dict)  # judge -> (mode, run) -> per-user B in user order
    graded_rows: list = field(default_factory=list)


async def _run_targets(store: Store, ids: list[str], verdicts: list[dict], singles: dict, graded: set) -> _Targets:
    found = _Targets()
    paneled = {v["run"] for v in verdicts}
    for run in sorted(ids):
        # judge -> target -> score; None: the run's one judge, who speaks through the rows themselves
        mine = (judge_scores([], [v for v in verdicts if v["run"] == run], singles, []) if run in paneled
                else {singles[run]: None})
        users: dict = {name: {} for name in mine}  # judge -> (mode, k) -> user -> B
        spoke = set()  # one-judge runs whose judge gave a score (an ok row)
        group, rows = None, {}
        async for r in store.judges.targets([run], DEFAULT_VARIANT):  # by mode, k and user
            if (r["mode"], r["k"], r["user_id"]) != group:
                _fold_user(users, group, rows)
                group, rows = (r["mode"], r["k"], r["user_id"]), {name: [] for name in mine}
            found.scored.add(run)
            key = _key(r)
            if key in graded:
                found.graded_rows.append(dict(r))
            for name, scores in mine.items():
                rows[name].append(_judged(r, key, scores))
                if scores is None and r["status"] == "ok":
                    spoke.add(name)
        _fold_user(users, group, rows)
        for name, scores in mine.items():
            if scores or name in spoke:
                found.recovery.setdefault(name, {}).update(_headline(run, users[name]))
    return found


def _judged(row, key: tuple, scores: dict | None) -> tuple:
    """(category, score, status) of a target under one judge: the judge's score where it judged, the
    row's own where no judge was asked (unknown labels, overflow); dropped by the judge = failed."""
    if scores is None or key not in scores:
        return row["category"], row["score"], row["status"]
    return row["category"], scores[key], ("ok" if scores[key] is not None else "failed")


def _fold_user(users: dict, group: tuple | None, rows: dict) -> None:
    """One user's B in one pass under each judge, once the user's rows are all read."""
    if group is not None:
        mode, k, user = group
        for name, found in rows.items():
            users[name].setdefault((mode, k), {})[user] = user_recovery(user, found).B


def _headline(run: str, users: dict) -> dict:
    """(mode, run) -> per-user B in user order: dump_all, and retrieve at k = 5 or the smallest k scored."""
    out = {}
    for mode in ("dump_all", "retrieve"):
        ks = sorted(k for m, k in users if m == mode)
        if ks:
            k = HEADLINE_K if HEADLINE_K in ks else ks[0]
            out[(mode, run)] = [b for _, b in sorted(users[(mode, k)].items())]
    return out


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
            out.setdefault(v["judge"], {})[_key(v)] = v["score"] if v["status"] == "ok" else None
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


def _per_judge(name: str, recovery: dict | None, mine: dict, verdicts: list[dict], checks: dict | None,
               grades: list[dict]) -> dict:
    checked = ((checks or {}).get("judges") or {}).get(name)
    out = {"model": name, **_recovery(recovery),
           "positive_pass": None, "negative_false_pass": None, "flag": None,
           "retest_changed": _retest(name, verdicts, checked), "human": _human(
               {t: s for t, s in mine.items() if s is not None}, grades),
           "dropped": sum(1 for v in verdicts if v["judge"] == name and v["repeat"] == 0 and v["status"] != "ok")}
    if checked is not None:
        out.update({k: checked[k] for k in ("positive_pass", "positive_pass_ci95", "negative_false_pass",
                                             "negative_false_pass_ci95", "flag")})
    return out


def _recovery(recovery: dict | None) -> dict:
    """B under a judge: the mean over every (run, user) it judged (`_headline`, runs in order); a
    target the judge was dropped from is left out, counted."""
    if not recovery:
        return {"B_dump_all": None, "B_retrieve": None}
    out = {}
    for mode in ("dump_all", "retrieve"):
        values = [v for (m, run), found in sorted(recovery.items()) if m == mode for v in found if v is not None]
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
