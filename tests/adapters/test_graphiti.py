"""Graphiti on its embedded Kuzu through the recording proxy: its calls go through memaudit's
client under `memory:graphiti` (its default client: JSON schema through the Responses API), it is given the user's messages
only, each as an episode at the logical time, its graph (episodes, entities, facts) is the dump,
its default search ranks facts, and a restore rebuilds the same graph from the cache."""
from __future__ import annotations

import anyio

from memaudit.llm.proxy import recording_proxy
from tests.adapters.conftest import EPISODES, adapter_runtime, library_marks, play, script

pytestmark = library_marks("graphiti")


def graphiti_calls(fake) -> list[dict]:
    return [b for b in fake.requests
            if (b.get("response_format") or {}).get("json_schema", {}).get("name") == "memory_graphiti"]


def test_the_graph_grows_from_user_messages_through_the_proxy(settings, fake):
    async def main():
        async with adapter_runtime("graphiti", settings, script(fake)) as (make, rt):
            adapter = make()
            await play(adapter, EPISODES[:1])
            calls = graphiti_calls(fake)
            assert calls and rt.llm.stats["memory:graphiti"].calls == len(calls)
            assert (await recording_proxy(rt.llm)).served["/v1/responses"] == len(calls)
            assert not any(reply in str(b["messages"]) for b in calls for reply, _ in EPISODES[0][1])
            dump = adapter.dump()
            episodes = [item for item in dump if item["category"] == "episode"]
            assert [e["content"] for e in episodes] == [f"user: {EPISODES[0][0]}",
                                                       *(f"user: {user}" for _, user in EPISODES[0][1])]
            assert all(e["valid_at"].startswith("2025-01-01") for e in episodes)  # the logical date
            assert {item["category"] for item in dump} == {"episode", "entity", "fact"}
            found = await adapter.search("marathon training schedule", 2)
            assert found and "training schedule" in found[0].content and found[0].score is not None
            assert adapter.write_failures == 0
    anyio.run(main)


def test_restore_rebuilds_the_graph_from_the_cache(settings, fake):
    async def main():
        async with adapter_runtime("graphiti", settings, script(fake)) as (make, _):
            original = make()
            await play(original, EPISODES[:2])
            calls = len(fake.requests)
            restored = make()
            await restored.restore(original.snapshot())
            assert len(fake.requests) == calls  # every call answered from the cache
            assert restored.dump() == original.dump() and restored.snapshot() == original.snapshot()
    anyio.run(main)
