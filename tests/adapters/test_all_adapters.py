"""Every registered system through the same scripted conversation: the adapter contract (writes,
searches, a snapshot/restore round trip with identical future behaviour, determinism), the
declared search order, counted write failures and loading a dumped store. What differs between
systems is what their adapters declare, never a list here."""
from __future__ import annotations

import anyio
import pytest

from memaudit.adapters.base import AgentContext, Event, MemoryAdapter
from memaudit.adapters.registry import builtin_names
from memaudit.testing.adapter_contract import CHECKS, QUERIES, check_adapter
from tests.adapters.conftest import (adapter_class, adapter_runtime, installed, is_library, play, script,
                                     system_params)

SYSTEMS = builtin_names()


def declared(system: str, fact: str, default=None):
    """A fact the system's adapter declares (`default` where its library is missing)."""
    return getattr(adapter_class(system), fact, default) if installed(system) else default


@pytest.mark.parametrize("system", system_params(SYSTEMS))
def test_the_adapter_contract_holds(system, tmp_path):
    """What `memaudit check-adapter` runs (memaudit/testing/adapter_contract.py), for every built-in."""
    results = anyio.run(check_adapter, system, tmp_path)
    assert [(c.name, c.problem) for c in results] == [(name, None) for name, _ in CHECKS]


@pytest.mark.parametrize("system", system_params(SYSTEMS))
def test_writes_and_searches(system, settings, fake):
    async def main():
        async with adapter_runtime(system, settings, script(fake)) as (make, rt):
            adapter = make()
            await play(adapter)
            dump = adapter.dump()
            if system == "nomem":
                assert dump == [] and not adapter.supports_retrieve
                return
            assert dump and all(isinstance(item["content"], str) and item["content"] for item in dump)
            for query in QUERIES:
                for k in (1, 3, 5):
                    found = await adapter.search(query, k)
                    assert len(found) <= k
                    scores = [item.score for item in found]
                    if not adapter_class(system).scored:
                        assert scores == [None] * len(found)
                    else:
                        assert scores == sorted(scores, reverse=True)
            context = await adapter.context("what should I eat before a run?", 5)
            assert isinstance(context, AgentContext)
            assert adapter.footprint()[0] == len(dump)
    anyio.run(main)


WITHOUT_MODEL_CALLS = ("nomem", "simple_rag", "bm25", "longctx_full")


def counts_a_failed_first_write(system: str) -> bool:
    """A write's first model call, faulted, is a counted write failure: not for a system that
    calls no model, nor a library whose messages go to a short-term queue first (one message calls
    no model: tests/adapters/test_llamaindex.py counts its failures once the queue flushes) or
    whose first call is the endpoint's tool check, which a garbage answer fails for good
    (memaudit/llm/client.py `check_native_tools`; tests/adapters/test_langmem.py counts its
    failures after the check), nor one that parses a free-text answer itself (its own error, counted:
    tests/adapters/test_memos.py)."""
    return (system not in WITHOUT_MODEL_CALLS and not declared(system, "QUEUED_WRITES", False)
            and not declared(system, "TOOL_CALLING", False) and not declared(system, "PARSES_FREE_TEXT", False))


def loads_a_dumped_store(system: str) -> bool:
    """Not a graph the library builds from its inputs with the model (its adapter has no `load_items`)."""
    adapter = adapter_class(system) if installed(system) else None
    return system != "nomem" and (adapter is None or adapter.load_items is not MemoryAdapter.load_items)


@pytest.mark.parametrize("system", system_params(filter(counts_a_failed_first_write, SYSTEMS)))
def test_failed_memory_call_is_counted_not_fatal(system, settings, fake):
    """A memory-side call that stays invalid after the repair budget skips that write."""
    async def main():
        async with adapter_runtime(system, settings, script(fake)) as (make, rt):
            adapter = make()
            faulted = declared(system, "faulted_request")  # adapters/deployed.py
            if faulted is None:
                fake.faults = ["garbage"] * (settings.repair_attempts + 1)
            else:
                fake.fault_for = lambda body: "garbage" if faulted(body) else None
            await adapter.observe(Event("task_start", "I am learning Rust and like terse answers.", 1, 0))
            await adapter.observe(Event("episode_end", "", 1, 0))
            state = adapter.snapshot()
            assert state["write_failures"] == 1
            assert state["failure_log"][0]["error"] == "InvalidOutput"
            if faulted is not None:  # the repair budget spent once a request; a library's own retry of the same
                # request answered from the cache, one with new messages (OWN_RETRIES) asked again
                attempts = declared(system, "OWN_RETRIES", 0) + 1
                assert sum(map(faulted, fake.requests)) == (settings.repair_attempts + 1) * attempts
    anyio.run(main)


@pytest.mark.parametrize("system", system_params(filter(loads_a_dumped_store, SYSTEMS)))
def test_load_items_from_a_published_dump(system, settings, fake):
    """A dumped store with only some native fields loads and searches; our own dump reloads as is."""
    minimal = [{"id": f"m{n}", "content": text, "tags": ["x"], "category": "facts", "score": 0.3}
               for n, text in enumerate(["Runs three times a week.", "Hurt a knee.", "Likes short answers."])]

    async def main():
        async with adapter_runtime(system, settings, script(fake)) as (make, rt):
            loaded = make()
            await loaded.load_items(minimal)
            found = await loaded.search("knee", 2)
            assert 1 <= len(found) <= 2 and "knee" in found[0].content
            original = make()
            await play(original)
            reloaded = make()
            await reloaded.load_items(original.dump())
            assert reloaded.dump() == original.dump()
    anyio.run(main)


def test_declared_prompts_exist_and_cover_every_memory_prompt():
    from memaudit.adapters.registry import get_adapter
    from memaudit.config import REPO_ROOT
    from memaudit.prompts import load_prompt

    names = {name for system in SYSTEMS if installed(system) and not is_library(system)
             for name in get_adapter(system).prompts}
    for name in names:
        assert load_prompt(name, REPO_ROOT / "prompts").header
    assert names == {p.stem for p in (REPO_ROOT / "prompts").glob("memory_*.md")}
