"""Every registered system through the same scripted conversation: it writes, searches, and
survives a snapshot/restore round-trip with identical future behaviour."""
from __future__ import annotations

import anyio
import pytest

from memaudit.adapters.base import AgentContext, Event
from memaudit.adapters.registry import builtin_names
from memaudit.testing.adapter_contract import CHECKS, QUERIES, check_adapter
from memaudit.testing.fake_openai import schema_of
from tests.adapters.conftest import EPISODES, adapter_runtime, play, script, system_params

SYSTEMS = builtin_names()
# Search results in an order without a score: the published memt (the order found), cognee (its
# chunk search ranks by a vector distance, kept as the native field `distance`), agno (its model
# picks the memories), letta and memos (their searches give their hits in order, without scores).
UNSCORED = ("memt", "cognee", "agno", "letta", "memos")
# A worker start of its own (Postgres, then the Letta server's imports: about 45 s) for each adapter
# made: the contract check (the first test) is its one run of these checks; tests/adapters/test_letta.py
# and the CLI acceptance test cover the rest.
CONTRACT_ONLY = ("letta",)


@pytest.mark.parametrize("system", system_params(SYSTEMS))
def test_the_adapter_contract_holds(system, tmp_path):
    """What `memaudit check-adapter` runs (memaudit/testing/adapter_contract.py), for every built-in."""
    results = anyio.run(check_adapter, system, tmp_path)
    assert [(c.name, c.problem) for c in results] == [(name, None) for name, _ in CHECKS]


@pytest.mark.parametrize("system", system_params(s for s in SYSTEMS if s not in CONTRACT_ONLY))
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
                    if system in UNSCORED:
                        assert scores == [None] * len(found)
                    else:
                        assert scores == sorted(scores, reverse=True)
            context = await adapter.context("what should I eat before a run?", 5)
            assert isinstance(context, AgentContext)
            assert adapter.footprint()[0] == len(dump)
    anyio.run(main)


@pytest.mark.parametrize("system", system_params(s for s in SYSTEMS if s not in CONTRACT_ONLY))
def test_snapshot_restore_round_trip(system, settings, fake):
    async def main():
        async with adapter_runtime(system, settings, script(fake)) as (make, rt):
            original = make()
            await play(original, EPISODES[:2])
            state = original.snapshot()
            restored = make()
            await restored.restore(state)
            assert restored.dump() == original.dump()
            assert restored.snapshot() == state
            for query in QUERIES:
                assert await restored.search(query, 5) == await original.search(query, 5)
            # Future behaviour is identical too: same ids, same decisions, same store.
            await play(original, EPISODES[2:], first_index=3)
            await play(restored, EPISODES[2:], first_index=3)
            assert restored.dump() == original.dump()
            assert restored.snapshot() == original.snapshot()
            # The snapshot is a copy: later writes do not change it.
            assert state != original.snapshot() or system == "nomem"
    anyio.run(main)


WITHOUT_MODEL_CALLS = ("nomem", "simple_rag", "bm25", "longctx_full")
# Writes into a short-term queue first: one message calls no model (tests/adapters/test_llamaindex.py
# counts its failures once the queue flushes).
QUEUED_WRITES = ("llamaindex",)
# Its first call is the endpoint's tool check (memaudit/llm/client.py `check_native_tools`), which a
# garbage answer fails for good: tests/adapters/test_langmem.py counts its failures after the check.
TOOL_CALLING = ("langmem", "agno", "letta")
# A free-text answer the library parses itself: a garbage answer fails inside the library (its error,
# not InvalidOutput; tests/adapters/test_memos.py counts it).
PARSED_BY_THE_LIBRARY = ("memos",)
# Faults by turn meet a write's first requests. cognee's first write sends a free-text connection
# probe, then its graph extraction and its chunk summary at once (asyncio.gather), which reach the
# model in an order that depends on scheduling: its fault is picked by content instead, every answer
# to its graph extraction (the probe and the summary are answered as usual).
FAULTED_CALL = {"cognee": lambda body: "nodes" in (schema_of(body) or {}).get("properties", {})}
# A graph the library builds from its inputs with the model: a dumped store does not load into it.
BUILT_FROM_INPUTS = ("graphiti", "cognee", "letta", "memos")


@pytest.mark.parametrize("system", system_params(s for s in SYSTEMS if s not in WITHOUT_MODEL_CALLS + QUEUED_WRITES + TOOL_CALLING
                                              + PARSED_BY_THE_LIBRARY))
def test_failed_memory_call_is_counted_not_fatal(system, settings, fake):
    """A memory-side call that stays invalid after the repair budget skips that write."""
    async def main():
        async with adapter_runtime(system, settings, script(fake)) as (make, rt):
            adapter = make()
            faulted = FAULTED_CALL.get(system)
            if faulted is None:
                fake.faults = ["garbage"] * (settings.repair_attempts + 1)
            else:
                fake.fault_for = lambda body: "garbage" if faulted(body) else None
            await adapter.observe(Event("task_start", "I am learning Rust and like terse answers.", 1, 0))
            await adapter.observe(Event("episode_end", "", 1, 0))
            state = adapter.snapshot()
            assert state["write_failures"] == 1
            assert state["failure_log"][0]["error"] == "InvalidOutput"
            if faulted is not None:  # the repair budget spent once; the library's own retry answered from the cache
                assert sum(map(faulted, fake.requests)) == settings.repair_attempts + 1
    anyio.run(main)


@pytest.mark.parametrize("system", system_params(s for s in SYSTEMS if s not in ("nomem", *BUILT_FROM_INPUTS)))
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

    declared = {name for system in SYSTEMS if system != "mem0ai" for name in get_adapter(system).prompts}
    for name in declared:
        assert load_prompt(name, REPO_ROOT / "prompts").header
    assert declared == {p.stem for p in (REPO_ROOT / "prompts").glob("memory_*.md")}
