"""Adapters under test: a fast deterministic encoder, a runtime on the fake server, a scripted
conversation."""
from __future__ import annotations

import hashlib
import importlib.util
import re
from contextlib import asynccontextmanager

import numpy as np
import pytest

from memaudit.adapters.base import AdapterContext, Event
from memaudit.adapters.registry import get_adapter
from memaudit.llm.embed import DIM, Embedder
from memaudit.runtime import open_runtime


# The mem0ai system needs its optional extra (installed by `make install` and in CI).
HAS_MEM0AI = importlib.util.find_spec("mem0") is not None
needs_mem0ai = pytest.mark.skipif(not HAS_MEM0AI, reason="the mem0ai extra is not installed")


def system_params(names) -> list:
    """Systems as test parameters; mem0ai is skipped where its library is missing."""
    return [pytest.param(name, marks=needs_mem0ai) if name == "mem0ai" else name for name in names]


def hash_encoder(texts: list[str]) -> np.ndarray:
    """Hashed bag of words, normalised: texts sharing words are near, like a real embedding."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[row, int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % DIM] += 1.0
        norm = np.linalg.norm(out[row])
        if norm:
            out[row] /= norm
        else:
            out[row, 0] = 1.0
    return out


@asynccontextmanager
async def adapter_runtime(name: str, settings, fake, *, window: int | None = None):
    """(adapter factory, runtime): the factory makes fresh adapters sharing one scope and embedder."""
    embedder = Embedder(None, encoder=hash_encoder)
    async with open_runtime(settings, transport=fake.transport(), embedder=embedder) as rt:
        def make():
            return get_adapter(name)(AdapterContext(rt.llm, rt.embedder, scope="run/u1",
                                                    agent_context_window=window))
        yield make, rt


EPISODES = [
    ("Help me plan a 10k training schedule; I ran a half marathon last spring and hurt my knee.",
     [("Here is a four-week plan with three runs a week.", "I prefer short answers. I work night shifts as a nurse."),
      ("A shorter plan: run Monday, Wednesday and Saturday mornings.", "Thanks, that works for me.")]),
    ("Can you explain how Python decorators work? I use Python for data analysis at the hospital.",
     [("A decorator wraps a function to extend its behaviour.", "Show me an example with timing, please.")]),
    ("Suggest a weekend hiking trip near Munich; I moved there from Berlin this year.",
     [("Try the Herzogstand ridge walk, about five hours.", "Great, I love ridge walks with views.")]),
]


def events(episodes=EPISODES, first_index: int = 1):
    """The event sequence the rollout scaffold produces for these episodes."""
    for offset, (task, turns) in enumerate(episodes):
        index = first_index + offset
        yield Event("task_start", task, index, 0)
        for turn, (reply, user) in enumerate(turns, 1):
            yield Event("assistant", reply, index, turn)
            yield Event("user", user, index, turn)
        yield Event("episode_end", "", index, len(turns))


async def play(adapter, episodes=EPISODES, first_index: int = 1) -> None:
    for event in events(episodes, first_index):
        await adapter.observe(event)


def add_every_fact(body):
    """mem0's decision call: ADD each new fact (so the store grows deterministically)."""
    facts = body["messages"][-1]["content"].split("New facts:\n", 1)[1].splitlines()
    return {"decisions": [{"fact": n, "event": "ADD", "id": "", "text": line.split(". ", 1)[1]}
                          for n, line in enumerate(facts)]}


def memt_search_facts_once(body):
    """memt's ReAct policy: search the facts with the question itself, then finish."""
    prompt = body["messages"][-1]["content"]
    question = prompt.split("Question:\n", 1)[1].split("\n\nSteps so far:", 1)[0]
    if "Steps so far:\n(none yet)" in prompt:
        return {"thought": "look it up", "action": "search_facts", "query": question}
    return {"thought": "enough", "action": "finish", "query": ""}


def memt_fact_of_each_turn(body):
    """memt's formation policy: one fact, the turn's words, and a summary."""
    turn = body["messages"][-1]["content"].rsplit("Current turn:\n", 1)[1].removeprefix("user said: ")
    return {"tool_calls": [{"tool": "create_fact", "name": "", "content": turn},
                           {"tool": "update_summary", "name": "", "content": f"Latest: {turn}"}]}


def mem0ai_keep_the_message(body):
    """The mem0ai library's extraction: one memory, the new message's words."""
    new = body["messages"][-1]["content"].split("## New Messages\n", 1)[1].split("\n\n", 1)[0]
    return {"memory": [{"id": "0", "text": new.removeprefix("user: "), "attributed_to": "user",
                        "linked_memory_ids": []}]}


def script(fake):
    """Memory-side answers that make every system write; other roles keep the fake's defaults."""
    fake.on("memory_mem0_extract", lambda body: {"facts": [body["messages"][-1]["content"].rsplit("\n", 1)[-1]]})
    fake.on("memory_mem0_decide", add_every_fact)
    fake.on("memt_policy_formation", memt_fact_of_each_turn)
    fake.on("memt_policy_update", lambda body: {"operations": [{"op": "add", "target": -1, "content": ""}]})
    fake.on("memt_policy_search", memt_search_facts_once)
    fake.on("memory_mem0ai", mem0ai_keep_the_message)
    return fake
