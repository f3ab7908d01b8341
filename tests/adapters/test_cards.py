"""Every deployed library has a configuration card a maintainer can check: `memaudit systems --json`
gives each its rows of the four fields, `memaudit systems NAME` prints it, and the card's drift
check reads each stated default from the installed package, failing when an upgrade moves one (a
default moved by hand here shows it failing). A feature off because a piece is not installed is
an `off` row, on by itself where the piece is."""
from __future__ import annotations

import importlib.util

import orjson
import pytest

from memaudit.adapters.card import FIELDS, OFF, drifted
from memaudit.adapters.deployed import registered_libraries
from memaudit.adapters.registry import get_adapter
from tests.adapters.conftest import needs_library
from tests.cli_main import memaudit


def deployed() -> list[str]:
    """The deployed libraries installed here (adapters/deployed.py `registered_libraries`)."""
    return sorted(registered_libraries())


def test_systems_json_gives_each_deployed_library_its_card(capsys):
    assert memaudit("systems", "--json") == 0
    rows = {row["name"]: row for row in orjson.loads(capsys.readouterr().out)}
    libraries = deployed()
    assert len(libraries) >= 2  # the installed ones (make install brings them all)
    for name in libraries:
        card = rows[name]["configuration"]
        assert card and all(set(row) == set(FIELDS) for row in card), name
        assert all(isinstance(row[f], str) and row[f] for row in card for f in FIELDS), name
    assert "configuration" not in rows["simple_rag"]  # memaudit's own design: no library default to differ from


@pytest.mark.parametrize("name", deployed())
def test_the_card_states_the_installed_library_s_defaults(name):
    assert drifted(get_adapter(name).configuration()) == []


@needs_library("mem0ai")
def test_a_moved_default_fails_the_drift_check(monkeypatch):
    import mem0.configs.llms.base as llm_base

    init = llm_base.BaseLlmConfig.__init__
    defaults = list(init.__defaults__)
    names = [n for n in init.__code__.co_varnames[1:init.__code__.co_argcount]][-len(defaults):]
    defaults[names.index("temperature")] = 0.7  # what an upgrade could do
    monkeypatch.setattr(init, "__defaults__", tuple(defaults))
    assert drifted(get_adapter("mem0ai").configuration()) == [
        "llm temperature: the card says '0.1', the installed library 0.7"]


@needs_library("mem0ai")
def test_a_feature_whose_piece_is_missing_is_off_and_on_where_installed(capsys):
    rows = {row.setting: row for row in get_adapter("mem0ai").configuration()}
    bm25 = rows["hybrid search (BM25 keyword scoring)"]
    assert bm25.used == ("on" if importlib.util.find_spec("fastembed") else OFF)
    assert memaudit("systems", "mem0ai") == 0
    shown = capsys.readouterr().out
    assert "mem0ai: configuration card" in shown and "hybrid search" in shown


@pytest.mark.parametrize("name", deployed())
def test_docs_show_each_library_s_card_as_its_adapter_states_it(name):
    from memaudit.adapters.card import card_markdown
    from memaudit.config import REPO_ROOT

    docs = (REPO_ROOT / "docs" / "adapters.md").read_text()
    assert card_markdown(name, get_adapter(name).configuration()) in docs, \
        "docs/adapters.md's card differs from the adapter's: run scripts/library_table.py"
