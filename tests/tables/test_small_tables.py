"""The smaller tables (footprint, gap, tokens, comparisons, prompts, utilization, carry-over,
evolving, judges, judge-check) pinned byte for byte: md, latex and csv of a saved `tables` dict
(taken from stores the utilization, evolving and panel tests build, plus hand-made rows with
missing values) must read as the files beside it. Their layout moved into column declarations
(issue 22); what they print must not move with it."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from memaudit.tables.judges_render import check_tables
from memaudit.tables.paper import _md_table, render

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
    text = "\n\n".join(_md_table(*table) for table in check_tables(saved("judge_check.json"))) + "\n"
    assert text == (DATA / "judge_check.md").read_text(encoding="utf-8")
