"""The base class of the deployed-library adapters (adapters/deployed.py): what every library gets
from it is derived (its role, its extra), declared once (the facts tests and `plan` read) and on
its configuration card."""
from __future__ import annotations

import pytest

from memaudit.adapters.card import CardRow
from memaudit.adapters.deployed import DeployedLibrary, upstream_imports
from memaudit.adapters.registry import builtin_names, get_adapter
from memaudit.errors import BadInput, MemauditError


def deployed() -> list[type]:
    """The built-in systems that are deployed libraries and load here."""
    found = []
    for name in builtin_names():
        try:
            adapter = get_adapter(name)
        except MemauditError:  # its library is not installed
            continue
        if issubclass(adapter, DeployedLibrary):
            found.append(adapter)
    return found


def test_the_five_libraries_are_deployed_libraries():
    assert {a.name for a in deployed()} >= {"mem0ai", "graphiti", "llamaindex", "langmem"}


@pytest.mark.parametrize("adapter", deployed(), ids=lambda a: a.name)
def test_declared_facts_and_derived_names(adapter):
    assert adapter.ROLE == f"memory:{adapter.name}"
    assert adapter.EXTRA and adapter.library
    assert adapter.CALLS_PER_MESSAGE > 0
    assert isinstance(adapter.TOOL_CALLING, bool) and isinstance(adapter.QUEUED_WRITES, bool)


@pytest.mark.parametrize("adapter", deployed(), ids=lambda a: a.name)
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
