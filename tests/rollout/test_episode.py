"""The episode loop: end reasons, adapter events, fallbacks and failures."""
from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from memaudit.adapters.base import AdapterContext, Event, MemoryAdapter
from memaudit.adapters.registry import available, get_adapter
from memaudit.rollout.assistant import NOTES_HEADER, PREAMBLE_HEADER
from memaudit.rollout.episode import feed_transcript, run_episode
from memaudit.rollout.simulator import FALLBACK_TEXT

pytestmark = pytest.mark.anyio


class Recorder(MemoryAdapter):
    """Remembers every event it observes, the queries it was asked, and both in one timeline."""
    name = "recorder"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.events: list[Event] = []
        self.queries: list[str] = []
        self.timeline: list[tuple[str, str]] = []  # ("read", query) | (event kind, text)

    async def observe(self, event):
        self.events.append(event)
        self.timeline.append((event.kind, event.text))

    async def context(self, query, k):
        self.queries.append(query)
        self.timeline.append(("read", query))
        return await super().context(query, k)

    async def search(self, query, k):
        return []

    def dump(self):
        return []

    def snapshot(self):
        return {}

    async def restore(self, state):
        return None


def recorder(rt):
    return Recorder(AdapterContext(rt.llm, rt.embedder, scope="run/user_001"))


def sim(feedback_types):
    """A simulator handler answering the given feedback types in order (the last one repeats)."""
    calls = []

    def handler(body):
        calls.append(body)
        kind = feedback_types[min(len(calls), len(feedback_types)) - 1]
        return {"feedback_type": kind, "text": f"user message {len(calls)}"}
    return handler


async def test_ends_when_the_user_is_satisfied(open_rt, fake, bench):
    fake.on("simulator", sim(["followup", "satisfied"]))
    async with open_rt() as rt:
        adapter = recorder(rt)
        user, task = bench.users[0], bench.tasks["user_001"][0]
        ep = await run_episode(rt.llm, adapter, user, task, run="run", max_turns=5, k=5)
    assert ep.end_reason == "satisfied" and len(ep.turns) == 2
    assert [t.feedback_type for t in ep.turns] == ["followup", "satisfied"]
    assert all(t.preference_score is not None for t in ep.turns)
    assert [e.kind for e in adapter.events] == ["task_start", "assistant", "user", "assistant", "user", "episode_end"]
    assert adapter.events[-2].text == "user message 2"  # the final user message is offered to memory too
    assert adapter.queries == [task.text, "user message 1"]


async def test_memory_is_read_before_the_message_being_answered_is_stored(open_rt, fake, bench):
    fake.on("simulator", sim(["followup", "followup", "satisfied"]))
    fake.on_text(lambda body: f"reply {sum('response_format' not in r for r in fake.requests)}")
    async with open_rt() as rt:
        adapter = recorder(rt)
        task = bench.tasks["user_001"][0]
        await run_episode(rt.llm, adapter, bench.users[0], task, run="run", max_turns=5, k=5)
    assert adapter.timeline == [
        ("read", task.text), ("task_start", task.text), ("assistant", "reply 1"),
        ("read", "user message 1"), ("user", "user message 1"), ("assistant", "reply 2"),
        ("read", "user message 2"), ("user", "user message 2"), ("assistant", "reply 3"),
        ("user", "user message 3"), ("episode_end", ""),
    ]
    user_turns = [e.turn for e in adapter.events if e.kind == "user"]
    assert user_turns == [1, 2, 3]  # a user message keeps the turn it answered


async def test_a_replayed_transcript_drives_memory_exactly_like_the_live_loop(open_rt, fake, bench):
    fake.on("simulator", sim(["followup", "not a feedback type"]))
    async with open_rt() as rt:
        live = recorder(rt)
        task = bench.tasks["user_001"][0]
        ep = await run_episode(rt.llm, live, bench.users[0], task, run="run", max_turns=3, k=5)
        replayed = recorder(rt)
        await feed_transcript(replayed, task, ep.turns, k=5)
    assert any(t.fallback for t in ep.turns)  # the placeholder is shown, never stored
    assert replayed.timeline == live.timeline and replayed.events == live.events


async def test_first_turn_of_a_users_first_task_sees_no_memory_for_every_system(open_rt, fake, bench, settings):
    """The task is offered to memory only after the reply, so the first prompt holds it once."""
    fake.on("simulator", sim(["satisfied"]))
    task = bench.tasks["user_001"][0]
    for system in available():
        fake.requests.clear()
        async with open_rt(replace(settings, cache="off")) as rt:
            adapter = get_adapter(system)(AdapterContext(rt.llm, rt.embedder, scope=f"run/{system}"))
            await run_episode(rt.llm, adapter, bench.users[0], task, run=system, max_turns=1, k=5)
        # The first reply: not a structured call, nor a library's tool request (an endpoint's one
        # tool check, or its own tool-calling extraction).
        first = next(r for r in fake.requests if "response_format" not in r and "tools" not in r)
        prompt = orjson.dumps(first["messages"]).decode()
        assert prompt.count(task.text) == 1, system
        assert NOTES_HEADER not in prompt and PREAMBLE_HEADER not in prompt, system


async def test_ends_after_max_turns(open_rt, fake, bench):
    fake.on("simulator", sim(["too_shallow"]))
    async with open_rt() as rt:
        ep = await run_episode(rt.llm, recorder(rt), bench.users[0], bench.tasks["user_001"][0],
                               run="run", max_turns=3, k=5)
    assert ep.end_reason == "max_turns" and [t.index for t in ep.turns] == [1, 2, 3]


async def test_assistant_sees_the_conversation_not_the_bank(open_rt, fake, bench):
    fake.on("simulator", sim(["followup"]))
    async with open_rt() as rt:
        await run_episode(rt.llm, recorder(rt), bench.users[0], bench.tasks["user_001"][0],
                          run="run", max_turns=2, k=5)
    agent = [r for r in fake.requests if "response_format" not in r]
    assert len(agent) == 2
    first, second = agent[0]["messages"], agent[1]["messages"]
    task = bench.tasks["user_001"][0].text
    # As published: the task, then the task followed by the conversation so far, as one user message.
    assert [m["role"] for m in second] == ["system", "user"] and first[1]["content"] == task
    assert second[1]["content"].startswith(task) and second[1]["content"].endswith("User: user message 1")
    everything = orjson.dumps(agent).decode()
    assert "stance" not in everything and "Person 1" not in everything


async def test_garbage_simulator_falls_back_and_is_flagged(open_rt, fake, bench):
    fake.on("simulator", lambda body: "this is not json")
    async with open_rt() as rt:
        adapter = recorder(rt)
        ep = await run_episode(rt.llm, adapter, bench.users[0], bench.tasks["user_001"][0],
                               run="run", max_turns=2, k=5)
    assert ep.end_reason == "max_turns"
    assert all(t.fallback and t.feedback_type == "followup" and t.user_text == FALLBACK_TEXT for t in ep.turns)
    assert "user" not in [e.kind for e in adapter.events]  # placeholders never reach memory


async def test_assistant_failure_marks_the_episode_failed(open_rt, fake, bench):
    fake.on_text(lambda body: "")  # an empty reply stays invalid after the retries
    async with open_rt() as rt:
        adapter = recorder(rt)
        ep = await run_episode(rt.llm, adapter, bench.users[0], bench.tasks["user_001"][0],
                               run="run", max_turns=3, k=5)
    assert ep.end_reason == "failed" and ep.turns == [] and "assistant" in ep.error
    assert not any(r for r in fake.requests if r.get("response_format"))  # nothing reached the simulator
    assert [e.kind for e in adapter.events] == ["task_start", "episode_end"]


async def test_blank_simulator_text_is_repaired_then_falls_back(open_rt, fake, bench):
    fake.on("simulator", lambda body: {"feedback_type": "satisfied", "text": "   "})
    async with open_rt() as rt:
        ep = await run_episode(rt.llm, recorder(rt), bench.users[0], bench.tasks["user_001"][0],
                               run="run", max_turns=1, k=5)
    (turn,) = ep.turns
    assert turn.fallback and turn.feedback_type == "followup" and ep.end_reason == "max_turns"
