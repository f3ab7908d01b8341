"""LangMem's memory manager on LangGraph's in-memory store through the recording proxy: its tool
calls go through memaudit's client under `memory:langmem` (forwarded natively, or emulated by
structured output, with the same stored memories), it is given the user's messages only, at the
logical time, the store is the dump, its search ranks it, a restore refills it from the cache, a
tool call the library drops or a required call that never comes is a counted write failure, and
nothing is downloaded."""
from __future__ import annotations

from dataclasses import replace

import anyio
import pytest

from memaudit.testing import fake_openai
from tests.adapters.conftest import (EPISODES, FIRST_USER_MESSAGES, adapter_runtime, library_calls,
                                     library_marks, play, script)

pytestmark = library_marks("langmem")
ROLE = "memory:langmem"


def test_memories_grow_from_user_messages_through_the_proxy(settings, fake):
    async def main():
        async with adapter_runtime("langmem", settings, script(fake)) as (make, rt):
            adapter = make()
            await play(adapter, EPISODES[:1])
            calls = library_calls(fake)
            assert len(calls) == len(FIRST_USER_MESSAGES) == rt.llm.stats[ROLE].calls
            assert all(b["tools"] for b in calls)  # forwarded natively on the openai dialect
            assert not any(reply in str(b["messages"]) for b in calls for reply, _ in EPISODES[0][1])
            dump = adapter.dump()
            # The fake calls the tool twice (parallel calls) with the latest message's words.
            assert [item["content"] for item in dump] == [text for said in FIRST_USER_MESSAGES
                                                          for text in (said, f"also: {said}")]
            assert {item["schema"] for item in dump} == {"Memory"}
            assert all(item["created_at"].startswith("2025-01-01") for item in dump)  # the logical date
            found = await adapter.search("training schedule knee", 2)
            assert len(found) == 2 and "training schedule" in found[0].content
            assert found[0].score >= found[1].score
            assert adapter.write_failures == 0
    anyio.run(main)


@pytest.mark.parametrize("backend", ["llamacpp", "vllm"])
def test_emulated_and_native_tool_calls_store_the_same_memories(backend, settings):
    async def stored(backend: str) -> tuple[list[dict], list[dict]]:
        fake = script(fake_openai.FakeOpenAI())
        async with adapter_runtime("langmem", replace(settings, backend=backend), fake) as (make, _):
            adapter = make()
            await play(adapter, EPISODES[:2])
            return adapter.dump(), library_calls(fake)

    async def main():
        native, native_calls = await stored("openai")
        emulated, emulated_calls = await stored(backend)
        assert all("tools" in b for b in native_calls) and not any("tools" in b for b in emulated_calls)
        assert all("tool_calls" in str(b["response_format"]) for b in emulated_calls)
        assert emulated == native and len(native) > len(FIRST_USER_MESSAGES)
    anyio.run(main)


def test_restore_refills_the_store_from_the_cache(settings, fake):
    async def main():
        async with adapter_runtime("langmem", settings, script(fake)) as (make, _):
            original = make()
            await play(original, EPISODES[:2])
            calls = len(fake.requests)
            restored = make()
            await restored.restore(original.snapshot())
            assert len(fake.requests) == calls  # nothing asked of the model
            assert restored.dump() == original.dump() and restored.snapshot() == original.snapshot()
    anyio.run(main)


def patching_a_memory_never_shown(body: dict) -> list[dict]:
    """The model's answer once memories exist: a patch of a memory it was not shown."""
    if "PatchDoc" not in str(body["tools"]):
        return NATIVE_CALLS(body)
    return [{"id": "call_patch", "type": "function", "function": {"name": "PatchDoc", "arguments": (
        '{"json_doc_id": "no-such-memory", "planned_edits": "replace it", '
        '"patches": [{"op": "replace", "path": "/content", "value": "x"}]}')}}]


NATIVE_CALLS = fake_openai.native_calls


def test_a_tool_call_the_library_drops_is_a_counted_write_failure(settings, fake, monkeypatch):
    """trustcall drops a patch of an unknown memory with only a log line: the write is counted lost."""
    monkeypatch.setattr(fake_openai, "native_calls", patching_a_memory_never_shown)

    async def main():
        async with adapter_runtime("langmem", settings, script(fake)) as (make, _):
            adapter = make()
            await play(adapter, [(EPISODES[0][0], [])])  # the first memory: inserted
            stored = adapter.dump()
            await play(adapter, [("I moved to Munich this year.", [])], first_index=2)
            assert adapter.dump() == stored
            assert adapter.write_failures == 1 and adapter.failures.entries[0]["error"] == "InvalidOutput"
            assert adapter.failures.entries[0]["clock"] == "task002.turn00"
    anyio.run(main)


def test_a_required_tool_call_that_never_comes_is_a_counted_write_failure(settings, fake):
    """An endpoint that stops calling tools after the check: the manager's update (tool_choice
    `any`) fails, trustcall retries it until LangGraph's step limit, and the write is counted once."""
    async def main():
        async with adapter_runtime("langmem", settings, script(fake)) as (make, _):
            adapter = make()
            await play(adapter, [(EPISODES[0][0], [])])
            stored = adapter.dump()
            fake.ignore_tools = True
            await play(adapter, [("I moved to Munich this year.", [])], first_index=2)
            assert adapter.dump() == stored
            assert adapter.write_failures == 1 and adapter.failures.entries[0]["error"] == "InvalidOutput"
    anyio.run(main)


def test_nothing_is_downloaded_and_tracing_is_off(settings, fake, monkeypatch, tmp_path):
    import langsmith.utils
    import tiktoken.load

    def fetch(blobpath):
        raise AssertionError(f"downloaded {blobpath}")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # no cached encoding to fall back on
    monkeypatch.setattr(tiktoken.load, "read_file", fetch)

    async def main():
        async with adapter_runtime("langmem", settings, script(fake)) as (make, _):
            adapter = make()
            await play(adapter, EPISODES[:1])
            assert await adapter.search("knee", 3)
    anyio.run(main)
    assert not langsmith.utils.tracing_is_enabled()
