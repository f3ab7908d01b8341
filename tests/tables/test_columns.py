"""Tables 2, 3 and 4 are each declared once (memaudit/tables/columns.py): md, latex, csv, json and
the HTML report show the columns of that one list, and every value the row builders make is
declared."""
from __future__ import annotations

import csv
import io
import re

import orjson
import pytest

from memaudit.report.html import esc
from memaudit.report.view import write_report
from memaudit.tables.columns import COMMON, TABLE2, TABLE3, TABLE4, common_legend, legend, shown
from memaudit.tables.paper_render import PREFACE, render, title
from tests.tables.test_tables import tables_of, with_store

DECLARED = {"table2": TABLE2, "table3": TABLE3, "table4": TABLE4}
REPORT_HEADINGS = {"table2": "<h2>Table 2", "table3": "<h2>Table 3", "table4": "<h2>Table 4"}


def declared_keys(columns, output: str) -> list[str]:
    return [key for column in shown(columns, output) for key in column.data_keys()]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    return tables_of(tmp_path_factory.mktemp("columns"), bootstrap=50)


@pytest.mark.parametrize("name", DECLARED)
def test_every_row_value_is_declared_once(name, tables):
    keys = declared_keys(DECLARED[name], "json")
    rows = tables[name]
    assert len(keys) == len(set(keys))
    assert rows and all(set(row) <= set(keys) for row in rows)
    assert set().union(*rows) == set(keys)  # a pass that was not attributed has no published map


@pytest.mark.parametrize("name", DECLARED)
def test_every_output_shows_the_declared_columns(name, tables):
    columns = DECLARED[name]
    only = {name: tables[name]}
    headers = [c.header for c in shown(columns, "md")]
    md = render(only, "md")
    assert md.startswith(f"## {PREFACE}\n\n" + "".join(f"- **{h}**: {doc}\n" for h, doc in common_legend("md")))
    assert f"\n## {title(name)}\n\n| " + " | ".join(headers) + " |\n" in md
    # under the table, what each of its columns means, as declared
    assert md.endswith("\n\n" + "\n".join(f"- **{h}**: {doc}" for h, doc in legend(columns)) + "\n")
    assert {h for h, _ in legend(columns)} | {c.header for c in COMMON} >= set(headers)
    latex = render(only, "latex").splitlines()
    assert latex[latex.index(r"\toprule") + 1].count(" & ") + 1 == len(headers)
    rows = orjson.loads(render(only, "json"))[name]
    assert [list(row) for row in rows] == [[k for k in row if k in declared_keys(columns, "json")]
                                           for row in tables[name]]
    section = render(only, "csv").split(f"# {name}\n", 1)[1]
    csv_header = next(csv.reader(io.StringIO(section)))
    assert {h.removesuffix("_low").removesuffix("_high") for h in csv_header} == set(declared_keys(columns, "csv"))


def test_the_report_shows_the_same_columns(tmp_path):
    out = tmp_path / "report"
    with_store(tmp_path, lambda store: write_report(store, out))
    index = (out / "index.html").read_text()
    for name, columns in DECLARED.items():
        table = index.split(REPORT_HEADINGS[name], 1)[1].split("</thead>", 1)[0]
        assert re.findall(r"<th>(.*?)</th>", table) == \
            [esc(c.short or c.header).replace("_", "_<wbr>") for c in shown(columns, "html")]
        # the report adds columns (system, users) to the md ones, in the same order; it shows Table 2's
        # four failure counts in one column, each run's models in its list of runs and the texts the
        # embedding model cut in the memory health table
        html_keys = {key for c in shown(columns, "html") for key in c.keys}
        assert [c.header for c in shown(columns, "html") if "md" in c.outputs] == \
            [c.header for c in shown(columns, "md") if "html" in c.outputs]
        assert {key for c in shown(columns, "md") for key in c.keys} - html_keys <= {"models", "embed_truncated"}
    assert "<th>models</th>" in index.split("<h2>Runs</h2>", 1)[1].split("</thead>", 1)[0]
