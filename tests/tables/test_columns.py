"""Table 2 is declared once (memaudit/tables/columns.py): md, latex, csv, json and the HTML report
show the columns of that one list, and every value the row builder makes is declared."""
from __future__ import annotations

import csv
import io
import re

import orjson

from memaudit.report.html import esc
from memaudit.report.view import write_report
from memaudit.tables.columns import TABLE2, shown
from memaudit.tables.paper import render
from tests.tables.test_tables import tables_of, with_store


def declared_keys(output: str) -> list[str]:
    return [key for column in shown(TABLE2, output) for key in column.data_keys()]


def test_every_row_value_is_declared_once(tmp_path):
    rows = tables_of(tmp_path, bootstrap=50)["table2"]
    keys = declared_keys("json")
    assert len(keys) == len(set(keys))
    assert all(set(row) == set(keys) for row in rows)


def test_every_output_shows_the_declared_columns(tmp_path):
    tables = tables_of(tmp_path, bootstrap=50)
    headers = [c.header for c in shown(TABLE2, "md")]
    md = render(tables, "md")
    assert "| " + " | ".join(headers) + " |" in md
    latex = render(tables, "latex")
    assert sum(line.count(" & ") + 1 for line in latex.splitlines() if line.startswith("run & A")) == len(headers)
    assert list(orjson.loads(render(tables, "json"))["table2"][0]) == \
        [k for k in tables["table2"][0] if k in declared_keys("json")]
    section = render(tables, "csv").split("# table2\n", 1)[1]
    csv_header = next(csv.reader(io.StringIO(section)))
    assert {h.removesuffix("_low").removesuffix("_high") for h in csv_header} == set(declared_keys("csv"))


def test_the_report_shows_the_same_table2_columns(tmp_path):
    out = tmp_path / "report"
    with_store(tmp_path, lambda store: write_report(store, out))
    table2 = (out / "index.html").read_text().split("<h2>Table 2", 1)[1].split("</thead>", 1)[0]
    assert re.findall(r"<th>(.*?)</th>", table2) == [esc(c.header) for c in shown(TABLE2, "html")]
    # the report adds system and users to the md columns, in the same order
    assert [c.header for c in shown(TABLE2, "html") if "md" in c.outputs] == [c.header for c in shown(TABLE2, "md")]
