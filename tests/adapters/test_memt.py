"""memt as the published Mem-T integration, pinned with a scripted policy: items are their written
document followed by their source turns, `turns` holds the user's messages only, personas are keyed
by name, the summary is one running item, every candidate gets an update call (with or without
neighbours), and the ReAct search returns what it collected in the order found, never turns, and
nothing after an early finish."""
from __future__ import annotations

import anyio

from memaudit.adapters.base import Event
from memaudit.adapters.memt import SOURCE_HEADING
from memaudit.types import MemoryItem
from tests.adapters.conftest import adapter_runtime


def turn_of(body) -> str:
    return body["messages"][-1]["content"].rsplit("Current turn:\n", 1)[1]


def formation(body):
    if "stopped" not in turn_of(body):
        return {"tool_calls": [
            {"tool": "create_fact", "name": "", "content": "Runs three times a week."},
            {"tool": "create_experience", "name": "", "content": "A half marathon without training hurt a knee."},
            {"tool": "update_persona", "name": "Sam", "content": "A runner."},
            {"tool": "update_summary", "name": "", "content": "Planning a 10k."}]}
    return {"tool_calls": [
        {"tool": "create_fact", "name": "", "content": "No longer runs."},
        {"tool": "update_persona", "name": "Sam", "content": "A former runner."},
        {"tool": "update_persona", "name": "Alex", "content": "Sam's running partner."},
        {"tool": "update_summary", "name": "", "content": "Planning a 10k; stopped running."}]}


def update(body):
    if "[0]" in body["messages"][-1]["content"]:  # a neighbour to negate: delete it and add the new fact
        return {"operations": [{"op": "delete", "target": 0, "content": ""},
                               {"op": "add", "target": -1, "content": ""}]}
    return {"operations": [{"op": "add", "target": -1, "content": ""}]}


def requests_of(fake, name):
    return [r for r in fake.requests if r["response_format"]["json_schema"]["name"] == name]


async def written(make):
    memt = make()
    await memt.observe(Event("task_start", "I run three times a week.", 1, 0))
    await memt.observe(Event("assistant", "ASSISTANT-REPLY: here is a plan.", 1, 1))
    await memt.observe(Event("user", "Actually I stopped running; Alex too.", 1, 1))
    await memt.observe(Event("episode_end", "", 1, 1))
    return memt


def test_items_carry_their_source_turns_and_turns_hold_user_messages_only(settings, fake):
    fake.on("memt_policy_formation", formation)
    fake.on("memt_policy_update", update)

    async def main():
        async with adapter_runtime("memt", settings, fake) as (make, rt):
            memt = await written(make)
            by = {c: [i for i in memt.dump() if i["category"] == c]
                  for c in ("turns", "facts", "experiences", "personas", "summary")}
            first, second = "user said: I run three times a week.", "user said: Actually I stopped running; Alex too."
            assert [t["content"] for t in by["turns"]] == [first, second]
            assert not any("ASSISTANT-REPLY" in str(r["messages"]) for r in fake.requests)
            # delete on explicit negation, then the add the policy asked for
            assert [f["content"] for f in by["facts"]] == ["No longer runs." + SOURCE_HEADING + second]
            assert by["experiences"][0]["content"].endswith(SOURCE_HEADING + first)
            assert by["experiences"][0]["metadata"]["memory_content"] == "A half marathon without training hurt a knee."
            # personas keyed by name, rewritten in place; one running summary gaining every source turn
            assert {p["id"]: p["metadata"]["memory_content"] for p in by["personas"]} == {
                "Sam": "A former runner.", "Alex": "Sam's running partner."}
            assert by["personas"][0]["content"] == "A former runner." + SOURCE_HEADING + first + "\n" + second
            assert [s["content"] for s in by["summary"]] == [
                "Planning a 10k; stopped running." + SOURCE_HEADING + first + "\n" + second]
            # the second formation call sees the running summary and the named persona
            second_formation = requests_of(fake, "memt_policy_formation")[1]["messages"][-1]["content"]
            assert "Planning a 10k." in second_formation and "Name: Sam, Profile: A runner." in second_formation
            # every candidate gets an update call, the first ones with no neighbours at all
            updates = requests_of(fake, "memt_policy_update")
            assert len(updates) == 3 and "Stored items:\n(none)" in updates[0]["messages"][-1]["content"]
    anyio.run(main)


def test_bad_update_index_is_logged_and_skipped(settings, fake):
    fake.on("memt_policy_formation", lambda body: {"tool_calls": [
        {"tool": "create_fact", "name": "", "content": turn_of(body).removeprefix("user said: ")}]})
    answers = iter([{"operations": [{"op": "add", "target": -1, "content": ""}]},
                    {"operations": [{"op": "ignore", "target": -1, "content": ""}]},
                    {"operations": [{"op": "update", "target": 5, "content": "x"}]}])
    fake.on("memt_policy_update", lambda body: next(answers))

    async def main():
        async with adapter_runtime("memt", settings, fake) as (make, rt):
            memt = make()
            for turn, text in enumerate(["I like tea.", "I like tea a lot.", "I like green tea."]):
                await memt.observe(Event("user" if turn else "task_start", text, 1, turn))
            assert [i["metadata"]["memory_content"] for i in memt.dump() if i["category"] == "facts"] == ["I like tea."]
            assert memt.bad_indices == [{"clock": "task001.turn02", "decision": "update", "index": 5}]
    anyio.run(main)


def test_react_search_returns_collected_items_in_order_found_without_turns(settings, fake):
    fake.on("memt_policy_formation", formation)
    fake.on("memt_policy_update", update)
    steps = [{"thought": "", "action": "search_turns", "query": "running"},
             {"thought": "", "action": "search_personas", "query": "runner"},
             {"thought": "", "action": "search_facts", "query": "running"},
             {"thought": "", "action": "search_personas", "query": "runner"},
             {"thought": "", "action": "finish", "query": ""}]
    fake.on("memt_policy_search", lambda body: steps[body["messages"][-1]["content"].count("\nsearch_")])

    async def main():
        async with adapter_runtime("memt", settings, fake) as (make, rt):
            memt = await written(make)
            found = await memt.search("how often does the user run", 5)
            assert [i.fields["category"] for i in found] == ["personas", "facts"]  # order found, de-duplicated
            assert all(i.score is None for i in found)
            assert found[1].content == "No longer runs."  # the written document
            context = await memt.context("how often does the user run", 5)
            assert [n.fields["category"] for n in context.notes] == ["personas", "facts", "personas"]
            assert len(requests_of(fake, "memt_policy_search")) == 5  # context reused the cached steps
    anyio.run(main)


def test_early_finish_returns_nothing_and_context_falls_back_to_stored_items(settings, fake):
    fake.on("memt_policy_formation", formation)
    fake.on("memt_policy_update", update)
    fake.on("memt_policy_search", lambda body: {"thought": "", "action": "finish", "query": ""})

    async def main():
        async with adapter_runtime("memt", settings, fake) as (make, rt):
            memt = await written(make)
            assert await memt.search("how often does the user run", 5) == []
            context = await memt.context("how often does the user run", 5)
            dump = memt.dump()
            assert [n.content for n in context.notes] == [i["content"][:400] for i in dump[:20]]
    anyio.run(main)


def test_react_search_stops_after_six_tool_steps(settings, fake):
    fake.on("memt_policy_formation", formation)
    fake.on("memt_policy_update", update)
    fake.on("memt_policy_search", lambda body: {"thought": "", "action": "search_facts", "query": "running"})

    async def main():
        async with adapter_runtime("memt", settings, fake) as (make, rt):
            memt = await written(make)
            found = await memt.search("running", 3)
            assert [i.content for i in found] == ["No longer runs."]
            assert len(requests_of(fake, "memt_policy_search")) == 6
    anyio.run(main)


def test_context_drops_empty_documents_before_keeping_the_first_twenty(settings, fake):
    """As the published agent: the assistant's lines are the collected items with a document, the
    first 20 of them; empty ones never take a place among the 20."""
    found = [MemoryItem(f"e{n}", "", None, {}) for n in range(3)] + \
        [MemoryItem(f"i{n}", f"fact {n}", None, {}) for n in range(25)]

    async def main():
        async with adapter_runtime("memt", settings, fake) as (make, rt):
            memt = make()

            async def collect(query):
                return found
            memt._collect = collect
            return await memt.context("anything", 5)

    assert [item.id for item in anyio.run(main).notes] == [f"i{n}" for n in range(20)]
