"""The upstream mem0ai library through the recording proxy: its model calls go through memaudit's
client under `memory:mem0ai` (cached, counted with the episode), it sees the user's messages only,
its ids, times and prompt dates follow the logical clock, and two runs on separate stores are
identical."""
from __future__ import annotations

import anyio
import orjson

from memaudit.llm.embed import Embedder
from memaudit.rollout.runner import run_rollout
from memaudit.runtime import open_runtime
from memaudit.testing.fake_openai import FakeOpenAI
from tests.adapters.conftest import (EPISODES, FIRST_USER_MESSAGES, adapter_runtime, hash_encoder,
                                     library_marks, play, script)
from tests.rollout.conftest import make_bench
from memaudit.testing.adapter_contract import mem0ai_requests
from tests.scoring.recorded import script as script_rollout

pytestmark = library_marks("mem0ai")


def test_library_calls_are_recorded_under_its_role_and_see_user_messages_only(settings, fake):
    async def main():
        async with adapter_runtime("mem0ai", settings, script(fake)) as (make, rt):
            adapter = make()
            await play(adapter, EPISODES[:1])
            calls = mem0ai_requests(fake)
            assert len(calls) == 3  # the task and the two replies
            # Sent as mem0 sends it: its own sampling defaults, its JSON mode without a schema of ours.
            from mem0.configs.llms.base import BaseLlmConfig
            defaults = BaseLlmConfig()
            assert all(c["temperature"] == defaults.temperature and c["top_p"] == defaults.top_p for c in calls)
            assert all(c["response_format"] == {"type": "json_object"} for c in calls)
            prompts = [c["messages"][-1]["content"] for c in calls]
            assert not any(reply in p for p in prompts for reply, _ in EPISODES[0][1])
            assert all("2025-01-01" in p for p in prompts)  # today's date is the logical one
            assert rt.llm.stats["memory:mem0ai"].calls == 3
            dump = adapter.dump()
            assert sorted(item["content"] for item in dump) == sorted(
                FIRST_USER_MESSAGES)
            assert all(item["timestamp"].startswith("2025-01-01T00:0") for item in dump)
            found = await adapter.search("knee injury from running", 2)
            assert found and "knee" in found[0].content and found[0].score is not None
    anyio.run(main)


def test_two_runs_on_separate_stores_are_identical(tmp_path, settings):
    from dataclasses import replace

    async def run(db):
        fake = script_rollout(script(FakeOpenAI()))
        async with open_runtime(replace(settings, db=db), transport=fake.transport()) as rt:
            rt.embedder = Embedder(rt.store.vectors, encoder=hash_encoder)
            bench = make_bench(n_users=1, n_tasks=2)
            await rt.store.benchmarks.save(bench, replace=True)
            await run_rollout(rt, bench, ["mem0ai"], max_turns=2, progress=False)
            snapshots = await rt.store.fetchall("SELECT task_idx, state, items FROM snapshots ORDER BY task_idx")
            uses = await rt.store.fetchall("SELECT u.artifact FROM call_uses u JOIN calls c ON c.key = u.key "
                                           "WHERE c.role = 'memory:mem0ai'")
            return [tuple(r) for r in snapshots], {r["artifact"] for r in uses}

    async def main():
        first, second = await run(tmp_path / "a.db"), await run(tmp_path / "b.db")
        assert first == second
        snapshots, artifacts = first
        assert orjson.loads(snapshots[-1][2])  # something was stored
        assert artifacts == {"episode:user_001:1", "episode:user_001:2"}  # the library's calls count for the episodes
    anyio.run(main)


def test_an_extraction_answer_its_parser_drops_is_a_counted_write_failure(settings, fake):
    """mem0 logs an answer it cannot parse and keeps nothing: the write is counted lost."""
    async def main():
        async with adapter_runtime("mem0ai", settings, script(fake)) as (make, _):
            adapter = make()
            fake.on_json_object(lambda body: "the memory is: knee")  # not JSON
            await play(adapter, [(EPISODES[0][0], [])])
            assert adapter.dump() == [] and adapter.write_failures == 1
            assert adapter.failures.entries[0]["error"] == "InvalidOutput"
    anyio.run(main)
