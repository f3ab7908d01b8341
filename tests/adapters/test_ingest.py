"""`rollout --ingest exchange`: a deployed library is given each user message with the assistant
reply before it, through its own multi-message add (mem0ai sees the reply in its extraction
request); a restore gives the same exchanges again; the run's config records it, and the default
(`user`, the published study's) is recorded as runs always were, so old runs resume and replay."""
from __future__ import annotations

from dataclasses import replace

import anyio
import pytest

from memaudit.adapters.base import AdapterContext
from memaudit.adapters.registry import get_adapter
from memaudit.errors import BadInput
from memaudit.rollout.runner import run_rollout
from memaudit.store import RunConfig
from memaudit.testing.adapter_contract import mem0ai_requests
from memaudit.types import EXCHANGE_INGEST, USER_INGEST
from tests.adapters.conftest import EPISODES, adapter_runtime, needs_library, play, script
from tests.rollout.conftest import make_bench

REPLIES = [reply for reply, _ in EPISODES[0][1]]


def exchange_adapter(system: str, rt):
    return get_adapter(system)(AdapterContext(rt.llm, rt.embedder, scope="run/u1", ingest=EXCHANGE_INGEST))


@needs_library("mem0ai")
def test_mem0ai_is_sent_the_reply_before_each_user_message(settings, fake):
    async def main():
        async with adapter_runtime("mem0ai", settings, script(fake)) as (_, rt):
            await play(exchange_adapter("mem0ai", rt), EPISODES[:1])
            prompts = [body["messages"][-1]["content"] for body in mem0ai_requests(fake)]
            assert len(prompts) == 3
            assert not any(reply in prompts[0] for reply in REPLIES)  # the task's text answers no reply
            assert all(reply in prompt for reply, prompt in zip(REPLIES, prompts[1:]))
    anyio.run(main)


@needs_library("graphiti")
def test_a_restore_gives_the_library_the_same_exchanges(settings, fake):
    async def main():
        async with adapter_runtime("graphiti", settings, script(fake)) as (_, rt):
            original = exchange_adapter("graphiti", rt)
            await play(original, EPISODES[:1])
            episodes = [item["content"] for item in original.dump() if item["category"] == "episode"]
            assert episodes[1] == f"assistant: {REPLIES[0]}\nuser: {EPISODES[0][1][0][1]}"
            calls = len(fake.requests)
            restored = exchange_adapter("graphiti", rt)
            await restored.restore(original.snapshot())
            assert len(fake.requests) == calls and restored.dump() == original.dump()
            for adapter in (original, restored):  # its HTTP client closed in this event loop, not a later one
                await adapter.instance.llm_client.client.close()
    anyio.run(main)


def test_the_run_config_records_it_and_the_default_as_before(settings, fake):
    assert "ingest" not in RunConfig().to_json()  # every run recorded before compares as it was
    assert RunConfig.from_json(RunConfig(ingest=EXCHANGE_INGEST).to_json()).ingest == EXCHANGE_INGEST

    async def main():
        async with adapter_runtime("nomem", settings, script(fake)) as (_, rt):
            bench = make_bench(n_users=1, n_tasks=1)
            await rt.store.benchmarks.save(bench, replace=True)
            await run_rollout(rt, bench, ["nomem"], max_turns=1, progress=False)
            await run_rollout(rt, bench, ["nomem"], max_turns=1, progress=False, tag="x", ingest=EXCHANGE_INGEST)
            assert (await rt.store.runs.get("nomem")).config.ingest == USER_INGEST
            assert (await rt.store.runs.get("nomem_x")).config.ingest == EXCHANGE_INGEST
            with pytest.raises(BadInput, match="different ingest"):
                await run_rollout(rt, bench, ["nomem"], max_turns=1, progress=False, ingest=EXCHANGE_INGEST)
            with pytest.raises(BadInput, match="--ingest"):
                await run_rollout(rt, replace(bench), ["nomem"], progress=False, tag="y", ingest="everything")
    anyio.run(main)
