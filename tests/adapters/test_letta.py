"""The Letta server in its own environment (a worker process per user, its own embedded Postgres)
through the recording proxy: each user message is sent to the user's agent, whose MemGPT loop
(a tool call every step) saves to archival memory and replies with send_message; its calls go
through memaudit's client under `memory:letta`; the dump is its blocks and passages on the logical
clock; a loop that ends without send_message is a counted write failure. Integration: a worker
start imports the Letta server and starts Postgres."""
from __future__ import annotations

import anyio
import pytest

from memaudit.adapters.letta import REPLY_TOOL
from tests.adapters.conftest import (EPISODES, FIRST_USER_MESSAGES, adapter_runtime, events, needs_library,
                                     play, script)

pytestmark = [needs_library("letta"), pytest.mark.integration]


def agent_steps(fake) -> list[dict]:
    return [body for body in fake.requests if REPLY_TOOL in str(body.get("tools"))]


def test_each_user_message_goes_to_the_agent_whose_loop_saves_it_and_replies(settings, fake):
    async def main():
        async with adapter_runtime("letta", settings, script(fake)) as (make, rt):
            adapter = make()
            await play(adapter, EPISODES[:1])
            steps = agent_steps(fake)
            # Two steps a message (save, reply), every one a required tool call, through the proxy.
            assert len(steps) == 2 * len(FIRST_USER_MESSAGES) and rt.llm.stats["memory:letta"].calls == len(steps)
            assert {body["tool_choice"] for body in steps} == {"required"}
            assert not any(reply in str(body["messages"]) for body in steps for reply, _ in EPISODES[0][1])
            dump = adapter.dump()
            passages = [item for item in dump if item["kind"] == "passage"]
            assert [p["content"] for p in passages] == [f"The user said: {m}" for m in FIRST_USER_MESSAGES]
            assert all(p["created_at"].startswith("2025-01-01") for p in passages)  # the logical date
            # Its persona block; the human block, empty until the agent writes it, holds no memory yet.
            assert {item["label"] for item in dump if item["kind"] == "block"} == {"persona"}
            found = await adapter.search("knee injury half marathon", 2)
            assert len(found) == 2 and "half marathon" in found[0].content and found[0].score is None
            assert adapter.write_failures == 0
            await adapter.close()
    anyio.run(main)


def test_a_loop_that_ends_without_send_message_is_a_counted_write_failure(settings, fake):
    """A model that never replies: Letta's loop stops at its step bound (50), the write is counted."""
    async def main():
        script(fake).tool_chooser = lambda request, messages: [("conversation_search", {
            "query": "anything", "request_heartbeat": True})] if REPLY_TOOL in request.names else None
        async with adapter_runtime("letta", settings, fake) as (make, _):
            adapter = make()
            await adapter.observe(next(events(EPISODES[:1])))  # the task text
            assert len(agent_steps(fake)) == 50
            assert adapter.write_failures == 1
            await adapter.close()
    anyio.run(main)

