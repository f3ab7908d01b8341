"""docs/cost.md quotes the line `memaudit cost` prints first about the bundled price list: a new list
(another date or source) makes this fail until that page says what `cost` says."""
from __future__ import annotations

from memaudit.cli.study_cmds import _prices_line
from memaudit.config import REPO_ROOT
from memaudit.study.cost import load_prices


def test_the_docs_quote_costs_source_line():
    line = _prices_line(load_prices().describe())
    assert f"```\n{line}\n```" in (REPO_ROOT / "docs" / "cost.md").read_text(encoding="utf-8")
