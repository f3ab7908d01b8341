"""The smaller tables (footprint, gap, tokens, comparisons, prompts, utilization, carry-over,
evolving, judges, judge-check) pinned byte for byte: md, latex and csv of a saved `tables` dict
(taken from stores the utilization, evolving and panel tests build, plus hand-made rows with
missing values) must read as the files beside it. Their layout moved into column declarations
(issue 22); what they print must not move with it, and the report shows the same declarations."""
from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from memaudit.report import evolving, judges, utilization
from memaudit.report.columns import declared
from memaudit.report.html import esc
from memaudit.tables.carryover import CARRYOVER
from memaudit.tables.columns import shown
from memaudit.tables.evolving import EVOLVING, EVOLVING_TARGETS
from memaudit.tables.judges_render import PER_JUDGE, SUMMARY, check_tables
from memaudit.tables.paper import DECLARED
from memaudit.tables.paper_render import md_table, render
from memaudit.tables.utilization import COUNTS, UTILIZATION

DATA = Path(__file__).parent / "data"


def saved(name: str):
    return orjson.loads((DATA / name).read_bytes())


@pytest.mark.parametrize("fmt", ["md", "latex", "csv"])
def test_the_smaller_tables_print_as_pinned(fmt):
    assert render(saved("small_tables.json"), fmt) == (DATA / f"small_tables.{fmt}").read_text(encoding="utf-8")


def test_json_carries_every_value_of_the_smaller_tables():
    tables = saved("small_tables.json")
    assert orjson.loads(render(tables, "json")) == tables


def test_the_judge_check_report_prints_as_pinned():
    text = "\n\n".join(md_table(*table) for table in check_tables(saved("judge_check.json"))) + "\n"
    assert text == (DATA / "judge_check.md").read_text(encoding="utf-8")


def headers(html: str, after: str = "") -> list[str]:
    """The headers of the first table after the text `after`."""
    table = html[html.index(after):].split("</thead>", 1)[0]
    return re.findall(r"<th>(.*?)</th>", table)


def html_headers(columns) -> list[str]:
    return [esc(c.short if c.short is not None else c.header).replace("_", "_<wbr>") for c in shown(columns, "html")]


def test_the_report_shows_each_smaller_table_from_its_declaration():
    tables = saved("small_tables.json")
    for name in ("footprint", "health", "gap", "tokens", "comparisons", "prompts"):
        assert headers(declared(DECLARED[name], tables[name])) == html_headers(DECLARED[name])
    sections = utilization.index_sections(tables, lambda *_: None)
    assert headers(sections, "Know/Act") == html_headers(UTILIZATION)
    assert headers(sections, "carry-over and bother") == html_headers(CARRYOVER)
    evolving_html = evolving.index_section(tables, lambda *_: None)
    assert headers(evolving_html, "FAMA and stale") == html_headers(EVOLVING)
    assert headers(evolving_html, "criteria per target") == html_headers(EVOLVING_TARGETS)
    judges_html = judges.index_section(tables, [])
    assert headers(judges_html, "<h2>Judges") == html_headers(SUMMARY)
    assert headers(judges_html.split("</table>", 1)[1]) == html_headers(PER_JUDGE)
    for columns in (*DECLARED.values(), PER_JUDGE, SUMMARY):  # the report shows what md shows, maybe more
        # (Table 2's failure counts grouped in one column: tests/tables/test_columns.py)
        assert [c.header for c in shown(columns, "html") if "md" in c.outputs] == \
            [c.header for c in shown(columns, "md") if "html" in c.outputs]


def test_a_utilization_row_links_its_run_and_counts_to_its_cases():
    html = utilization.index_sections(saved("small_tables.json"), lambda *_: None)
    page = utilization.cases_page("longctx_full", 5)
    assert f'<a href="{page}">longctx_full</a>' in html
    assert all(f'<a href="{page}#{count}">' in html for count in COUNTS)


def test_an_undefined_alpha_says_why():
    from memaudit.tables.judges_render import ALPHA_UNDEFINED, summary_rows

    section = {"agreement": {"alpha_ordinal": None, "alpha_ci": None, "exact": 1.0, "within_one": 1.0,
                             "alpha_by_category": {}, "pairs": []}, "panel_human": None}
    assert summary_rows(section)[0]["value"] == f"n/a ({ALPHA_UNDEFINED})"  # never a bare "n/a n/a"
