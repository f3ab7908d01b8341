"""The judges section and the judge-check report declared as tables (memaudit/tables/columns.py):
the panel's agreement as measure/value rows, one row per judge, and judge-check's rows per judge
and category. md, latex and the HTML report lay them out from these declarations."""
from __future__ import annotations

from memaudit.tables.columns import Column, human_text, interval_text, legend, num, text_table
from memaudit.tables.judge_checks import FALSE_PASS, MAX_FALSE_PASS, MIN_PASS, POSITIVES
from memaudit.types import CATEGORIES

# The panel's agreement, one measure a row (summary_rows).
SUMMARY = (Column("measure", ("measure",), "text"), Column("value", ("value",), "text"))

JUDGE = Column("judge", ("model",), "text",
               doc="the judge model (`recorded judge`: an imported run's one judge, whose model the release does "
                   "not name)")
POSITIVE_PASS = Column("positive pass", ("positive_pass",), "interval",
                       doc=f"judge-check: the share of control answers that must pass (the truth at "
                           f"{POSITIVES['truth']:g}, a paraphrase at {POSITIVES['paraphrase']:g} or above) that passed "
                           "[95% Wilson interval]")
FALSE_PASS_RATE = Column("negative false pass", ("negative_false_pass",), "interval",
                         doc=f"judge-check: the share of control answers that must fail (another user's value, a "
                             f"vague non-answer, the reversed value) scored {FALSE_PASS:g} or above [95% Wilson "
                             "interval]")
FLAG = Column("flag", ("flag",), "text",
              doc=f"judge-check: `lenient` when the negative false pass rate is over {MAX_FALSE_PASS:g}, `harsh` when "
                  f"the positive pass rate is under {MIN_PASS:g} (the defaults; judge-check's title names the ones used)")
RETEST = Column("retest changed", ("retest_changed",),
                doc="test–retest (--repeats): the share of targets asked more than once whose score changed")


def _pooled(mode: str) -> str:
    return (f"B from {mode} under this judge, all runs pooled: the mean over every (run, user) it scored of the "
            "user's B (not one run's B)")


PER_JUDGE = (
    JUDGE,
    Column("B full-store (runs pooled)", ("B_dump_all",), doc=_pooled("the whole final store")),
    Column("B top-k (runs pooled)", ("B_retrieve",), doc=_pooled("the top-k search")),
    POSITIVE_PASS,
    FALSE_PASS_RATE,
    FLAG,
    RETEST,
    Column("dropped", ("dropped",), doc="targets this judge's answer stayed invalid on (left out of the median)"),
    Column("vs human", ("human",), "human",
           doc="agreement with the human grades (`memaudit human import`): quadratic-weighted κ, exact and "
               "within-one-level shares over the n targets both graded"),
)

# judge-check: a judge's `all` row, then one row per category it was checked on (check_rows).
CHECKS = (
    Column("judge", ("judge",), "text", doc=JUDGE.doc),
    Column("category", ("category",), "text", doc="the category of the checked entries (`all`: every category)"),
    Column("positives", ("positives",), doc="control answers that must pass, judged"),
    POSITIVE_PASS,
    Column("negatives", ("negatives",), doc="control answers that must fail, judged"),
    FALSE_PASS_RATE,
    Column("failed", ("failed",), doc="control answers the judge never scored validly (not rated)"),
    FLAG,
    RETEST,
    Column("retest mean abs Δ", ("retest_mean_abs_change",),  # no pipe: it would split the md cell
           doc="test–retest: the mean absolute change of a repeated score from the first"),
)

# Why α reads n/a beside a panel: alpha_ordinal (memaudit/tables/agreement.py) is undefined.
ALPHA_UNDEFINED = "undefined: no target has two valid scores, or every score sits on one rubric level"

PER_JUDGE_TITLE = "Judges — per judge (B under this judge; control answers of judge-check; test–retest; human grades)"


def summary_title(section: dict) -> str:
    return f"Judges — panel {', '.join(section['panel']) or 'n/a'}"


def summary_rows(section: dict) -> list[dict]:
    agreement = section["agreement"]
    if agreement is None:
        found = [("agreement", section["agreement_reason"])]
    else:
        alpha = (interval_text(agreement["alpha_ordinal"], agreement["alpha_ci"], na=True)
                 if agreement["alpha_ordinal"] is not None else f"n/a ({ALPHA_UNDEFINED})")
        found = [("Krippendorff's α (ordinal)", alpha),
                 ("exact agreement (all judges)", num(agreement["exact"])),
                 ("within one level", num(agreement["within_one"]))]
        found += [(f"α {c}", num(agreement["alpha_by_category"].get(c))) for c in CATEGORIES]
        found += [(f"κ (quadratic) {p['a']} vs {p['b']}", f"{num(p['kappa_quadratic'])}; exact {num(p['exact'])}")
                  for p in agreement["pairs"]]
    if section.get("panel_human") is not None:
        found.append(("panel vs human", human_text(section["panel_human"])))
    return [{"measure": measure, "value": value} for measure, value in found]


def judges_tables(section: dict) -> list[tuple[str, list[str], list[list[str]], list[tuple[str, str]]]]:
    """(title, header, cells, legend) of the panel's agreement and of the per-judge table."""
    return [(summary_title(section), *text_table(SUMMARY, summary_rows(section)), []),
            (PER_JUDGE_TITLE, *text_table(PER_JUDGE, section["per_judge"]), legend(PER_JUDGE))]


def check_rows(summary: dict) -> list[dict]:
    """A judge's overall row and its rows per category; a category row has no flag or retest."""
    rows = []
    for name, j in summary["judges"].items():
        rows.append({"judge": name, "category": "all", **{k: v for k, v in j.items() if k != "categories"}})
        rows += [{"judge": name, "category": c, **r} for c, r in j["categories"].items() if r["positives"] or r["negatives"]]
    return rows


def check_tables(summary: dict) -> list[tuple[str, list[str], list[list[str]], list[tuple[str, str]]]]:
    """judge-check's report: per judge overall and per category."""
    t = summary["thresholds"]
    title = (f"judge-check — control answers (lenient: false pass > {t['max_false_pass']}; harsh: positive pass "
             f"< {t['min_pass']}; 95% Wilson intervals)")
    return [(title, *text_table(CHECKS, check_rows(summary)), legend(CHECKS))]
