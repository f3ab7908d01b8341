"""mem0's decision policy, pinned with a scripted model: UPDATE replaces the memory it names,
DELETE removes it, an invented id is logged and skipped."""
from __future__ import annotations

import re

import anyio

from memaudit.adapters.base import Event
from tests.adapters.conftest import adapter_runtime

FACTS = {
    "I live in Berlin.": "Lives in Berlin",
    "I have a cat named Tom.": "Has a cat named Tom",
    "I moved to Munich last month.": "Lives in Munich",
    "Sadly Tom died in May.": "No longer has a cat",
    "I like tea.": "Likes tea",
}


def message_of(body) -> str:
    return body["messages"][-1]["content"].rsplit("\n", 1)[-1]


def short_id(body, word: str) -> str:
    """The short id the decision prompt gave the memory containing `word`."""
    for short, text in re.findall(r"^\[(\d+)\] (.*)$", body["messages"][-1]["content"], re.M):
        if word in text:
            return short
    raise AssertionError(f"no memory with {word!r} shown")


def decide(body):
    fact = body["messages"][-1]["content"].split("New facts:\n", 1)[1].split(". ", 1)[1]
    if fact == "Lives in Munich":
        return {"decisions": [{"fact": 0, "event": "UPDATE", "id": short_id(body, "Berlin"), "text": fact}]}
    if fact == "No longer has a cat":
        return {"decisions": [{"fact": 0, "event": "DELETE", "id": short_id(body, "cat"), "text": ""}]}
    if fact == "Likes tea":
        return {"decisions": [{"fact": 0, "event": "UPDATE", "id": "42", "text": "Likes tea a lot"}]}
    return {"decisions": [{"fact": 0, "event": "ADD", "id": "", "text": fact}]}


def test_update_delete_and_invented_id(settings, fake):
    fake.on("memory_mem0_extract", lambda body: {"facts": [FACTS[message_of(body)]]})
    fake.on("memory_mem0_decide", decide)

    async def main():
        async with adapter_runtime("mem0", settings, fake) as (make, rt):
            mem0 = make()
            messages = list(FACTS)
            await mem0.observe(Event("task_start", messages[0], 1, 0))
            for turn, message in enumerate(messages[1:], 1):
                await mem0.observe(Event("assistant", "Noted.", 1, turn))
                if message == "I moved to Munich last month.":
                    berlin_id, cat_id = (i["id"] for i in mem0.dump())
                await mem0.observe(Event("user", message, 1, turn))
            dump = mem0.dump()
            assert [(i["id"], i["content"]) for i in dump] == [(berlin_id, "Lives in Munich")]
            assert dump[0]["metadata"]["updated"] == "task001.turn02"
            assert [(h["op"], h["id"]) for h in mem0.history] == [
                ("ADD", berlin_id), ("ADD", cat_id), ("UPDATE", berlin_id), ("DELETE", cat_id)]
            assert mem0.history[2]["old"] == "Lives in Berlin"
            assert mem0.unknown_ids == [{"clock": "task001.turn04", "event": "UPDATE", "id": "42"}]
            assert (await mem0.search("Where does the user live? Munich", 5))[0].content == "Lives in Munich"
    anyio.run(main)


def test_facts_come_from_user_messages_only(settings, fake):
    fake.on("memory_mem0_extract", lambda body: {"facts": ["Likes tea"]})
    fake.on("memory_mem0_decide", lambda body: {"decisions": [{"fact": 0, "event": "ADD", "id": "", "text": "Likes tea"}]})

    async def main():
        async with adapter_runtime("mem0", settings, fake) as (make, rt):
            mem0 = make()
            await mem0.observe(Event("task_start", "I like tea.", 1, 0))
            await mem0.observe(Event("assistant", "Tea is great. I, the assistant, like coffee.", 1, 1))
            await mem0.observe(Event("episode_end", "", 1, 1))
            roles = [r["response_format"]["json_schema"]["name"] for r in fake.requests]
            assert roles == ["memory_mem0_extract", "memory_mem0_decide"]
            assert [i["category"] for i in mem0.dump()] == ["task"]
    anyio.run(main)


def test_placeholder_echoes_are_not_stored(settings, fake):
    fake.on("memory_mem0_extract", lambda body: {"facts": ["...", "Likes tea"]})
    fake.on("memory_mem0_decide", lambda body: {"decisions": [
        {"fact": 0, "event": "ADD", "id": "", "text": "Likes tea"}, {"fact": 1, "event": "ADD", "id": "", "text": "…"}]})

    async def main():
        async with adapter_runtime("mem0", settings, fake) as (make, rt):
            mem0 = make()
            await mem0.observe(Event("task_start", "I like tea.", 1, 0))
            assert "0. Likes tea" in fake.requests[1]["messages"][-1]["content"]
            assert [i["content"] for i in mem0.dump()] == ["Likes tea"]
    anyio.run(main)
