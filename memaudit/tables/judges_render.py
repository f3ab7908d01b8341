"""The judges section and the judge-check report declared as tables (memaudit/tables/columns.py):
the panel's agreement as measure/value rows, one row per judge, and judge-check's rows per judge
and category. md, latex and the HTML report lay them out from these declarations."""
from __future__ import annotations

from memaudit.tables.columns import Column, human_text, interval_text, num, text_table
from memaudit.types import CATEGORIES

# The panel's agreement, one measure a row (summary_rows).
SUMMARY = (Column("measure", ("measure",), "text"), Column("value", ("value",), "text"))

PER_JUDGE = (
    Column("judge", ("model",), "text"),
    Column("B full-store", ("B_dump_all",)),
    Column("B top-k", ("B_retrieve",)),
    Column("positive pass", ("positive_pass",), "interval"),
    Column("negative false pass", ("negative_false_pass",), "interval"),
    Column("flag", ("flag",), "text"),
    Column("retest changed", ("retest_changed",)),
    Column("dropped", ("dropped",)),
    Column("vs human", ("human",), "human"),
)

# judge-check: a judge's `all` row, then one row per category it was checked on (check_rows).
CHECKS = (
    Column("judge", ("judge",), "text"),
    Column("category", ("category",), "text"),
    Column("positives", ("positives",)),
    Column("positive pass", ("positive_pass",), "interval"),
    Column("negatives", ("negatives",)),
    Column("negative false pass", ("negative_false_pass",), "interval"),
    Column("failed", ("failed",)),
    Column("flag", ("flag",), "text"),
    Column("retest changed", ("retest_changed",)),
    Column("retest mean abs Δ", ("retest_mean_abs_change",)),  # no pipe: it would split the md cell
)

PER_JUDGE_TITLE = "Judges — per judge (B under this judge; control answers of judge-check; test–retest; human grades)"


def summary_title(section: dict) -> str:
    return f"Judges — panel {', '.join(section['panel']) or 'n/a'}"


def summary_rows(section: dict) -> list[dict]:
    agreement = section["agreement"]
    if agreement is None:
        found = [("agreement", section["agreement_reason"])]
    else:
        found = [("Krippendorff's α (ordinal)", interval_text(agreement["alpha_ordinal"], agreement["alpha_ci"], na=True)),
                 ("exact agreement (all judges)", num(agreement["exact"])),
                 ("within one level", num(agreement["within_one"]))]
        found += [(f"α {c}", num(agreement["alpha_by_category"].get(c))) for c in CATEGORIES]
        found += [(f"κ (quadratic) {p['a']} vs {p['b']}", f"{num(p['kappa_quadratic'])}; exact {num(p['exact'])}")
                  for p in agreement["pairs"]]
    if section.get("panel_human") is not None:
        found.append(("panel vs human", human_text(section["panel_human"])))
    return [{"measure": measure, "value": value} for measure, value in found]


def judges_tables(section: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    return [(summary_title(section), *text_table(SUMMARY, summary_rows(section))),
            (PER_JUDGE_TITLE, *text_table(PER_JUDGE, section["per_judge"]))]


def check_rows(summary: dict) -> list[dict]:
    """A judge's overall row and its rows per category; a category row has no flag or retest."""
    rows = []
    for name, j in summary["judges"].items():
        rows.append({"judge": name, "category": "all", **{k: v for k, v in j.items() if k != "categories"}})
        rows += [{"judge": name, "category": c, **r} for c, r in j["categories"].items() if r["positives"] or r["negatives"]]
    return rows


def check_tables(summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """judge-check's report: per judge overall and per category."""
    t = summary["thresholds"]
    title = (f"judge-check — control answers (lenient: false pass > {t['max_false_pass']}; harsh: positive pass "
             f"< {t['min_pass']}; 95% Wilson intervals)")
    return [(title, *text_table(CHECKS, check_rows(summary)))]
