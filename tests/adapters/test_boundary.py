"""The adapter boundary and the plugin route: what an adapter author meets when an adapter is wrong,
a plugin does not load, or a plugin's name clashes — one line each, naming the system."""
from __future__ import annotations

import sys
import textwrap

import anyio
import orjson
import pytest

from memaudit.adapters import registry
from memaudit.adapters.base import Event, MemoryAdapter
from memaudit.adapters.boundary import ADAPTER_LOG, AdapterFault
from memaudit.cli import main
from memaudit.errors import BadInput
from memaudit.testing.adapter_contract import check_adapter, contract_runtime, play, script
from memaudit.testing.fake_openai import FakeOpenAI
from memaudit.types import MemoryItem
from tests.adapters.conftest import adapter_class, installed

PLUGIN = "memaudit_probe_plugin"

ADAPTERS = textwrap.dedent('''
    from memaudit.adapters.base import MemoryAdapter
    from memaudit.types import MemoryItem


    class Base(MemoryAdapter):
        name = "probe"

        def __init__(self, ctx):
            super().__init__(ctx)
            self.items = []

        async def observe(self, event):
            if event.kind == "user":
                self.items.append({"id": str(len(self.items)), "content": event.text})

        async def search(self, query, k):
            return [MemoryItem(i["id"], i["content"], 1.0 / (n + 1)) for n, i in enumerate(self.items[:k])]

        def dump(self):
            return [dict(i) for i in self.items]

        def snapshot(self):
            return {**self.state_header(), "items": self.dump()}

        async def restore(self, state):
            self.load_header(state)
            self.items = [dict(i) for i in state["items"]]


    class SearchReturnsText(Base):
        async def search(self, query, k):
            return "the memory as one string"


    class IntContent(Base):
        def dump(self):
            return [{"id": i["id"], "content": 2} for i in self.items]


    class SyncObserve(Base):
        def observe(self, event):
            self.items.append({"id": "x", "content": event.text})


    class RaisingObserve(Base):
        async def observe(self, event):
            raise ValueError("the vector store is not configured")
''')


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """Installs a package with five adapters (four broken), a plugin whose module is missing and
    one named like a built-in, through a real dist-info folder on sys.path (what pip writes)."""
    (tmp_path / f"{PLUGIN}.py").write_text(ADAPTERS)
    info = tmp_path / f"{PLUGIN}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PLUGIN}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(
        "[memaudit.adapters]\n"
        f"probe = {PLUGIN}:Base\nprobe_text = {PLUGIN}:SearchReturnsText\nprobe_int = {PLUGIN}:IntContent\n"
        f"probe_sync = {PLUGIN}:SyncObserve\nprobe_raise = {PLUGIN}:RaisingObserve\n"
        "probe_missing = no_such_module_anywhere:Adapter\n"
        f"nomem = {PLUGIN}:Base\n"
        "[memaudit.adapter]\n"  # a typo'd group
        f"typo_system = {PLUGIN}:Base\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.registrations.cache_clear()
    yield
    sys.modules.pop(PLUGIN, None)
    registry.registrations.cache_clear()


def run_contract(system, tmp_path):
    return {c.name: c.problem for c in anyio.run(check_adapter, system, tmp_path)}


@pytest.mark.parametrize("system, words", [
    ("probe_text", "memory system 'probe_text': search() returned a str, expected a list of MemoryItem"),
    ("probe_int", "memory system 'probe_int': dump() item 0: content is a int, expected a str"),
    ("probe_sync", "memory system 'probe_sync': observe() must be `async def`"),
    ("probe_raise", "memory system 'probe_raise': observe() raised ValueError: the vector store is not configured"),
])
def test_a_wrong_adapter_fails_in_one_line_naming_system_and_method(plugins, tmp_path, system, words):
    async def main_():
        async with contract_runtime(system, script(FakeOpenAI()), tmp_path, tmp_path) as make:
            adapter = make()
            await play(adapter)
            adapter.dump()
            await adapter.search("anything", 3)
    with pytest.raises(AdapterFault) as info:
        anyio.run(main_)
    assert str(info.value).startswith(words) and "\n" not in str(info.value)
    if system == "probe_raise":
        assert f"(traceback in {tmp_path / ADAPTER_LOG})" in str(info.value)
        assert "ValueError: the vector store is not configured" in (tmp_path / ADAPTER_LOG).read_text()


def test_check_adapter_passes_a_good_plugin_and_names_a_broken_ones_checks(plugins, tmp_path):
    assert set(run_contract("probe", tmp_path).values()) == {None}
    found = run_contract("probe_text", tmp_path)
    assert "search() returned a str" in found["writes and reads"]


def test_systems_lists_origins_broken_plugins_and_clashes(plugins, capsys):
    main(["systems"])
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "built-in" in lines["amem"] and lines["amem"].endswith("ok")
    assert f"{PLUGIN}==1.2.3" in lines["probe"] and lines["probe"].endswith("ok")
    assert "BROKEN" in lines["probe_missing"] and "No module named 'no_such_module_anywhere'" in lines["probe_missing"]
    clash = [line for name, line in lines.items() if name == "nomem" and PLUGIN in line]
    assert clash and "the built-in is called 'nomem': not used" in clash[0]
    assert registry.origin_of("nomem") == "built-in"


def test_systems_names_each_librarys_version_and_the_extra_of_one_not_installed(monkeypatch, capsys):
    """Before `make install` a deployed library's module does not import (langmem's needs pydantic):
    `systems` names the extra that brings it, not the import error; an installed one its version."""
    missing = registry.Registration("langmem", "no_such_library_module:LangMemMemory", registry.BUILTIN_ORIGIN)
    shipped = registry.Registration("nomem", "memaudit.adapters.nomem:NoMemory", registry.BUILTIN_ORIGIN)
    monkeypatch.setattr(registry, "registrations", lambda: (missing, shipped))
    with pytest.raises(BadInput, match=r"needs the 'langmem' extra.*pip install 'memaudit-bench\[langmem\]'"):
        registry.load(missing)
    main(["systems"])
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "not installed: memory system 'langmem' needs the 'langmem' extra" in lines["langmem"]
    assert "pip install 'memaudit-bench[langmem]'" in lines["langmem"] and "BROKEN" not in lines["langmem"]
    main(["systems", "--json"])
    rows = {r["name"]: r for r in orjson.loads(capsys.readouterr().out)}
    assert rows["langmem"]["extra"] == "langmem" and rows["langmem"]["version"] is None
    assert rows["nomem"]["extra"] is None and rows["nomem"]["version"] is None  # memaudit's own: no library


def test_every_deployed_library_has_an_extra_of_its_name():
    assert registry.extras() >= {"mem0ai", "graphiti", "llamaindex", "langmem", "cognee"}


def test_an_unknown_system_names_a_plugin_registered_under_a_mistyped_group(plugins):
    with pytest.raises(Exception, match="registers 'typo_system' under 'memaudit.adapter'"):
        registry.get_adapter("typo_system")


def test_a_plugins_version_is_in_the_run_provenance(plugins):
    from memaudit.rollout.runner import with_adapter_origin

    config = {"provenance": {"protocol": "2"}}
    assert with_adapter_origin(config, "probe")["provenance"] == {"protocol": "2", "adapter": f"{PLUGIN}==1.2.3"}
    assert with_adapter_origin(config, "nomem") == config  # a built-in: memaudit's protocol says it all


def test_check_adapter_command(tmp_path, capsys):
    main(["--db", str(tmp_path / "s.db"), "check-adapter", "bm25"])  # it takes no store
    out = capsys.readouterr().out
    assert "bm25: the adapter contract holds (3 checks)" in out and not (tmp_path / "s.db").exists()


def test_built_ins_come_from_the_pyproject_table_in_a_checkout():
    import tomllib

    from memaudit.config import REPO_ROOT

    table = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["memaudit.adapters"]
    assert registry.builtin_names() == sorted(table)
    assert all(issubclass(adapter_class(name), MemoryAdapter) for name in table if installed(name))


def test_the_boundary_passes_good_items_through():
    from memaudit.adapters.boundary import _items_problem

    assert _items_problem([MemoryItem("a", "x", 0.5), MemoryItem("b", "y", None)], 2) is None
    assert "score is True" in _items_problem([MemoryItem("a", "x", True)], 2)
    assert "returned 2 items for k=1" == _items_problem([MemoryItem("a", "x"), MemoryItem("b", "y")], 1)
    assert Event("user", "hi", 1, 1).clock == "task001.turn01"
