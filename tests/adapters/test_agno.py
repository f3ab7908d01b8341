"""Agno's MemoryManager on its SqliteDb through the recording proxy: its tool calls go through
memaudit's client under `memory:agno` (forwarded natively or emulated, with the same stored
memories), it is given the user's messages only, at the logical time, with ids from the clock; its
search is its agentic search; a restore refills the database without a model call; a tool loop that
does not end stops at the bound and is counted; nothing is printed."""
from __future__ import annotations

from dataclasses import replace

import anyio
import pytest

from memaudit.testing.fake_openai import FakeOpenAI
from tests.adapters.conftest import (EPISODES, FIRST_USER_MESSAGES, adapter_runtime, library_calls,
                                     needs_library, play, script)

pytestmark = needs_library("agno")
ROLE = "memory:agno"


def test_memories_come_from_user_messages_through_the_proxy(settings, fake):
    async def main():
        async with adapter_runtime("agno", settings, script(fake)) as (make, rt):
            adapter = make()
            await play(adapter, EPISODES[:1])
            calls = library_calls(fake)
            # Each message: one call answered with a tool call, one after its result (the loop ends).
            assert len(calls) == 2 * len(FIRST_USER_MESSAGES) == rt.llm.stats[ROLE].calls
            assert all({t["function"]["name"] for t in b["tools"]} == {"add_memory", "update_memory", "delete_memory"}
                       for b in calls)
            assert not any(reply in str(b["messages"]) for b in calls for reply, _ in EPISODES[0][1])
            dump = adapter.dump()
            assert [item["content"] for item in dump] == [f"The user said: {said}" for said in FIRST_USER_MESSAGES]
            assert [item["input"] for item in dump] == FIRST_USER_MESSAGES
            assert {item["kind"] for item in dump} == {"memory"}
            assert [item["created_at"] for item in dump] == [f"2025-01-01T00:0{turn}:00+00:00" for turn in range(3)]
            found = await adapter.search("knee injury", 3)
            assert [item.content for item in found] == [dump[0]["content"]] and found[0].score is None
            assert len(library_calls(fake)) == len(calls) + 1  # the agentic search: one call
            assert adapter.write_failures == 0
    anyio.run(main)


def test_ids_come_from_the_logical_clock(settings, fake):
    async def dump_of_a_fresh_run() -> list[dict]:
        async with adapter_runtime("agno", settings, script(FakeOpenAI())) as (make, _):
            adapter = make()
            await play(adapter, EPISODES[:1])
            return adapter.dump()

    async def main():
        first, second = await dump_of_a_fresh_run(), await dump_of_a_fresh_run()
        assert first == second and len({item["id"] for item in first}) == len(first)
    anyio.run(main)


@pytest.mark.parametrize("backend", ["llamacpp", "vllm"])
def test_emulated_and_native_tool_calls_store_the_same_memories(backend, settings):
    async def stored(backend: str) -> tuple[list[dict], list[dict]]:
        fake = script(FakeOpenAI())
        async with adapter_runtime("agno", replace(settings, backend=backend), fake) as (make, _):
            adapter = make()
            await play(adapter, EPISODES[:2])
            return adapter.dump(), library_calls(fake)

    async def main():
        native, native_calls = await stored("openai")
        emulated, emulated_calls = await stored(backend)
        assert all("tools" in b for b in native_calls) and not any("tools" in b for b in emulated_calls)
        assert emulated == native and native
    anyio.run(main)


def test_restore_refills_the_database_without_a_model_call(settings, fake):
    async def main():
        async with adapter_runtime("agno", settings, script(fake)) as (make, _):
            original = make()
            await play(original, EPISODES[:2])
            calls = len(fake.requests)
            restored = make()
            await restored.restore(original.snapshot())
            assert len(fake.requests) == calls
            assert restored.dump() == original.dump() and restored.snapshot() == original.snapshot()
            # The future too: the next message sees the same memories, answered from the cache.
            for adapter in (original, restored):
                await play(adapter, [("I moved to Munich this year.", [])], first_index=3)
            assert restored.dump() == original.dump()
    anyio.run(main)


def test_a_model_that_always_calls_a_tool_stops_at_the_bound_and_is_counted(settings, capsys):
    """Agno's loop has no step limit (agno-agi/agno#2243): the write stops at the bound, counted."""
    from memaudit.adapters.agno import MAX_MODEL_CALLS

    fake = FakeOpenAI()  # its default: a tool call in every answer, however many results it was given

    async def main():
        async with adapter_runtime("agno", settings, fake) as (make, _):
            adapter = make()
            await play(adapter, [(EPISODES[0][0], [])])
            assert len(library_calls(fake)) == MAX_MODEL_CALLS
            assert adapter.write_failures == 1 and adapter.failures.entries[0]["error"] == "InvalidOutput"
            assert adapter.failures.entries[0]["clock"] == "task001.turn00"
    anyio.run(main)
    assert capsys.readouterr().out == ""


def test_the_configuration_card_states_the_bound_and_the_search():
    from memaudit.adapters.agno import MAX_MODEL_CALLS, AgnoMemory

    rows = {row.setting: row for row in AgnoMemory.configuration()}
    assert rows["tool loop bound"].used == f"{MAX_MODEL_CALLS} model calls per write"
    assert "agno-agi/agno#2243" in rows["tool loop bound"].library_default
    assert (rows["search retrieval_method"].library_default, rows["search retrieval_method"].used) == ("last_n", "agentic")


def test_the_stdlib_uuid4_answers_from_agno_clocks_only():
    """agno replaces the stdlib's uuid.uuid4 (its tools import it when they run); another library's
    clock must not see it, or that library's ids would move by whether agno was imported."""
    import uuid

    import memaudit.adapters.agno  # noqa: F401  (the replacement happens at import)
    from memaudit.adapters.library_clock import LibraryClock

    other, agno = LibraryClock("other"), LibraryClock("agno")
    agno.draws_stdlib_uuid4 = True
    with other.running():
        uuid.uuid4()
    with agno.running():
        drawn = uuid.uuid4()
    assert other.uuids == 0 and agno.uuids == 1 and drawn == LibraryClock("agno").uuid4()
