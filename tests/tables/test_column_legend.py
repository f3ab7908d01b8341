"""Every column is defined once, in its declaration (memaudit/tables/columns.py and beside its maths),
and the definition is what md prints under the table, what the report shows beside it and what the
reference's "What each column means" (docs/tables.md) says: no column of the paper's tables goes unexplained."""
from __future__ import annotations

import pytest

from memaudit.config import REPO_ROOT
from memaudit.tables.columns import COMMON, common_legend, legend, shown
from memaudit.tables.judges_render import CHECKS, PER_JUDGE
from memaudit.tables.paper import DECLARED
from memaudit.tables.paper_render import PREFACE, title

LEGEND_TABLES = ("table2", "table3", "table4")


def legend_section() -> str:
    """docs/tables.md's legend of the headline tables, as the declarations say it."""
    parts = [f"## {PREFACE}", "", *(f"- **{h}**: {doc}" for h, doc in common_legend("md"))]
    for name in LEGEND_TABLES:
        parts += ["", f"## {title(name)}", "", *(f"- **{h}**: {doc}" for h, doc in legend(DECLARED[name]))]
    return "\n".join(parts) + "\n"


def test_the_docs_say_what_each_column_means_as_declared():
    page = (REPO_ROOT / "docs" / "tables.md").read_text(encoding="utf-8")
    assert legend_section() in page, "docs/tables.md's column legend differs from the declarations:\n" + legend_section()


@pytest.mark.parametrize("columns", [*DECLARED.values(), PER_JUDGE, CHECKS], ids=[*DECLARED, "per_judge", "checks"])
def test_every_column_a_table_shows_is_defined(columns):
    common = {c.header for c in COMMON}
    for output in ("md", "html"):
        defined = {h for h, _ in legend(columns, output)}
        undefined = [c.header for c in shown(columns, output) if c.header not in common
                     and (c.short if output == "html" and c.short else c.header) not in defined]
        assert undefined == [], f"columns without a definition in {output}: {undefined}"
