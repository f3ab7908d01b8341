"""mem0's graph mode (mem0ai 1.0.11, Kuzu embedded) in its own environment, through the recording
proxy: its JSON answers and its graph path's tool calls go through memaudit's client under
`memory:mem0_graph`, it is given the user's messages only, its prompt shows the logical date, the
dump and the search hold the graph's relations beside the memories, and an answer it cannot use is
a counted write failure. Each test starts worker processes (the library's import): integration."""
from __future__ import annotations

from datetime import date

import anyio
import pytest

from memaudit.testing.fake_openai import FakeOpenAI
from tests.adapters.conftest import (EPISODES, FIRST_USER_MESSAGES, adapter_runtime, library_calls,
                                     library_marks, play, script)

pytestmark = library_marks("mem0_graph")
ROLE = "memory:mem0_graph"


def test_memories_and_relations_come_from_user_messages(settings, fake):
    async def main():
        async with adapter_runtime("mem0_graph", settings, script(fake)) as (make, rt):
            adapter = make()
            await play(adapter, EPISODES[:1])
            calls = library_calls(fake)
            assert not any(reply in str(b["messages"]) for b in calls for reply, _ in EPISODES[0][1])
            tools = {t["function"]["name"] for b in calls for t in b.get("tools") or []}
            assert tools == {"extract_entities", "establish_relationships", "delete_graph_memory"}
            prompts = " ".join(str(m.get("content")) for b in calls for m in b["messages"])
            assert "2025-01-01" in prompts and date.today().isoformat() not in prompts  # the logical date
            dump = adapter.dump()
            memories = [item for item in dump if item["kind"] == "memory"]
            relations = [item for item in dump if item["kind"] == "edge"]
            assert [item["content"] for item in memories] == FIRST_USER_MESSAGES
            assert {(r["source"], r["relationship"]) for r in relations} == {("user", "mentioned")}
            assert "user mentioned training" in {r["content"] for r in relations}
            found = await adapter.search("what training did the user mention", 4)
            assert {item.fields["kind"] for item in found} == {"memory", "edge"}
            assert all(item.score is None for item in found)
            assert adapter.write_failures == 0 and rt.llm.stats[ROLE].calls > 0
    anyio.run(main)


def test_an_answer_it_cannot_parse_is_a_counted_write_failure(settings):
    """mem0 logs an unparsable fact extraction and stores nothing from it: counted, never silent."""
    fake = FakeOpenAI()  # free text that is no JSON for its extraction

    async def main():
        async with adapter_runtime("mem0_graph", settings, fake) as (make, _):
            adapter = make()
            await play(adapter, [(EPISODES[0][0], [])])
            assert adapter.write_failures == 1 and adapter.failures.entries[0]["error"] == "InvalidOutput"
            assert not [item for item in adapter.dump() if item["kind"] == "memory"]
    anyio.run(main)


@pytest.mark.parametrize("backend", ["llamacpp"])
def test_emulated_and_native_tool_calls_build_the_same_graph(backend, settings):
    from dataclasses import replace

    async def stored(backend: str) -> list[dict]:
        async with adapter_runtime("mem0_graph", replace(settings, backend=backend), script(FakeOpenAI())) as (make, _):
            adapter = make()
            await play(adapter, EPISODES[:1])
            return adapter.dump()

    async def main():
        assert await stored(backend) == await stored("openai")
    anyio.run(main)
