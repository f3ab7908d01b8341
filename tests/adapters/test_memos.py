"""MemOS's `general_text` memory in its own environment (a worker process per user, local Qdrant)
through the recording proxy: its extraction calls go through memaudit's client under
`memory:memos`, it is given the user's messages only, its items carry logical ids and times, and an
extraction answer its JSON parser cannot use is a counted write failure, never a silently empty
memory. Integration: a worker start imports MemOS."""
from __future__ import annotations

import anyio
import pytest

from tests.adapters.conftest import (EPISODES, FIRST_USER_MESSAGES, adapter_runtime, needs_library, play,
                                     script)

pytestmark = [needs_library("memos"), pytest.mark.integration]


def extraction_calls(fake) -> list[dict]:
    return [body for body in fake.requests if '"memory list"' in str(body["messages"][-1]["content"])]


def test_memories_extracted_from_user_messages_through_the_proxy(settings, fake):
    async def main():
        async with adapter_runtime("memos", settings, script(fake)) as (make, rt):
            adapter = make()
            await play(adapter, EPISODES[:1])
            calls = extraction_calls(fake)
            assert len(calls) == len(FIRST_USER_MESSAGES) and rt.llm.stats["memory:memos"].calls == len(calls)
            assert not any(reply in str(b["messages"]) for b in calls for reply, _ in EPISODES[0][1])
            dump = adapter.dump()
            assert sorted(item["content"] for item in dump) == sorted(f"The user said: {m}" for m in FIRST_USER_MESSAGES)
            assert all(item["kind"] == "memory" and item["updated_at"].startswith("2025-01-01") for item in dump)
            found = await adapter.search("knee injury half marathon", 2)
            assert len(found) == 2 and "half marathon" in found[0].content and found[0].score is None
            assert adapter.write_failures == 0
            await adapter.close()
    anyio.run(main)


def test_an_answer_its_parser_cannot_use_is_a_counted_write_failure(settings, fake):
    async def main():
        async with adapter_runtime("memos", settings, script(fake).on_text(lambda body: "Noted, thanks!")) as (make, _):
            adapter = make()
            await play(adapter, EPISODES[:1])
            assert adapter.dump() == []
            assert adapter.write_failures == 1 + len(EPISODES[0][1])
            assert {entry["role"] for entry in adapter.snapshot()["failure_log"]} == {"memory:memos"}
            await adapter.close()
    anyio.run(main)
