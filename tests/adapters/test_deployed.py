"""The base class of the deployed-library adapters (adapters/deployed.py): what every library gets
from it is derived (its role, its extra), declared once (the facts tests and `plan` read) and on
its configuration card."""
from __future__ import annotations

import pytest

from memaudit.adapters.card import CardRow
from memaudit.adapters.deployed import registered_libraries, upstream_imports
from memaudit.errors import BadInput


@pytest.mark.parametrize("adapter", registered_libraries().values(), ids=lambda a: a.name)
def test_declared_facts_and_derived_names(adapter):
    assert adapter.ROLE == f"memory:{adapter.name}"
    assert adapter.EXTRA and adapter.library
    assert adapter.CALLS_PER_MESSAGE > 0
    assert isinstance(adapter.TOOL_CALLING, bool) and isinstance(adapter.QUEUED_WRITES, bool)


@pytest.mark.parametrize("adapter", registered_libraries().values(), ids=lambda a: a.name)
def test_the_configuration_card_starts_with_the_base_rows(adapter):
    card = adapter.configuration()
    assert all(isinstance(row, CardRow) and row.setting and row.used for row in card)
    settings = [row.setting for row in card]
    assert settings[:6] == ["model", "embedder", "telemetry", "ids and times", "client retries", "client timeout"]
    assert adapter.ROLE in card[0].used
    assert len(settings) == len(set(settings))


def test_a_missing_library_is_one_line_naming_its_extra():
    with pytest.raises(BadInput, match=r"the somelib system needs the upstream library .*"
                                       r"pip install 'memaudit-bench\[other\]'"):
        with upstream_imports("somelib", extra="other"):
            import memaudit_no_such_library  # noqa: F401


def test_the_docs_table_is_what_the_adapters_declare():
    """docs/adapters.md's table of the deployed libraries (rewrite it: scripts/library_table.py)."""
    from memaudit.adapters.deployed import TABLE_END, TABLE_START, library_table
    from memaudit.adapters.registry import builtin_names
    from memaudit.config import REPO_ROOT
    from tests.adapters.conftest import deployed_libraries, installed

    if not all(installed(name) for name in builtin_names()):
        pytest.skip("a built-in library is not installed here")
    written = (REPO_ROOT / "docs" / "adapters.md").read_text().split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]
    expected = library_table({name: registered_libraries()[name] for name in deployed_libraries()})
    assert written.strip() == expected, "run scripts/library_table.py"
