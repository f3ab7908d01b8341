"""memt's tool protocol, pinned with a scripted policy: formation tool calls land in the right
collections, the update call adds / deletes as told, and the ReAct search collects, de-duplicates
and ranks."""
from __future__ import annotations

import anyio

from memaudit.adapters.base import Event
from tests.adapters.conftest import adapter_runtime


def formation(body):
    message = body["messages"][-1]["content"].rsplit("\n", 1)[-1]
    if message.startswith("I run"):
        return {"tool_calls": [
            {"tool": "create_fact", "content": "The user runs three times a week."},
            {"tool": "create_experience", "content": "The user hurt a knee in a half marathon."},
            {"tool": "update_persona", "content": "A runner who likes short answers."},
            {"tool": "update_summary", "content": "Planning a 10k."}]}
    return {"tool_calls": [
        {"tool": "create_fact", "content": "The user no longer runs three times a week."},
        {"tool": "update_persona", "content": "A former runner who likes short answers."},
        {"tool": "update_summary", "content": "Planning a 10k; the user stopped running."}]}


def update(body):
    return {"decision": "delete", "target": 0, "content": ""}


def test_formation_tools_fill_the_collections(settings, fake):
    fake.on("memt_policy_formation", formation)
    fake.on("memt_policy_update", update)

    async def main():
        async with adapter_runtime("memt", settings, fake) as (make, rt):
            memt = make()
            await memt.observe(Event("task_start", "I run three times a week and like short answers.", 1, 0))
            first = {c: [i["content"] for i in memt.dump() if i["category"] == c] for c in
                     ("turns", "facts", "experiences", "personas", "summary")}
            assert first == {"turns": ["[Task 1] I run three times a week and like short answers."],
                             "facts": ["The user runs three times a week."],
                             "experiences": ["The user hurt a knee in a half marathon."],
                             "personas": ["A runner who likes short answers."],
                             "summary": ["Planning a 10k."]}
            await memt.observe(Event("assistant", "Here is a plan.", 1, 1))
            await memt.observe(Event("user", "Actually I stopped running.", 1, 1))
            dump = memt.dump()
            by = {c: [i for i in dump if i["category"] == c] for c in ("turns", "facts", "personas", "summary")}
            assert len(by["turns"]) == 3
            # delete on explicit negation: the old fact goes, the new one is stored
            assert [f["content"] for f in by["facts"]] == ["The user no longer runs three times a week."]
            assert by["facts"][0]["metadata"]["ops"][0].startswith("add_after_delete:")
            # one persona and one summary per task, rewritten in place
            assert [p["content"] for p in by["personas"]] == ["A former runner who likes short answers."]
            assert by["personas"][0]["metadata"]["ops"] == ["create", "update"]
            assert [s["content"] for s in by["summary"]] == ["Planning a 10k; the user stopped running."]
    anyio.run(main)


def test_update_ignore_and_bad_index(settings, fake):
    fake.on("memt_policy_formation", lambda body: {"tool_calls": [
        {"tool": "create_fact", "content": body["messages"][-1]["content"].rsplit("\n", 1)[-1]}]})
    answers = iter([{"decision": "ignore", "target": -1, "content": ""},
                    {"decision": "update", "target": 5, "content": "x"}])
    fake.on("memt_policy_update", lambda body: next(answers))

    async def main():
        async with adapter_runtime("memt", settings, fake) as (make, rt):
            memt = make()
            for turn, text in enumerate(["I like tea.", "I like tea a lot.", "I like green tea."]):
                await memt.observe(Event("user" if turn else "task_start", text, 1, turn))
            assert [i["content"] for i in memt.dump() if i["category"] == "facts"] == ["I like tea."]
            assert memt.bad_indices == [{"clock": "task001.turn02", "decision": "update", "index": 5}]
    anyio.run(main)


def test_react_search_collects_and_deduplicates(settings, fake):
    fake.on("memt_policy_formation", formation)
    steps = iter([{"action": "search_facts", "query": "running"},
                  {"action": "search_facts", "query": "running"},
                  {"action": "search_personas", "query": "answers"},
                  {"action": "finish", "query": ""}])
    fake.on("memt_policy_search", lambda body: next(steps))

    async def main():
        async with adapter_runtime("memt", settings, fake) as (make, rt):
            memt = make()
            await memt.observe(Event("task_start", "I run three times a week and like short answers.", 1, 0))
            found = await memt.search("how often does the user run", 5)
            assert sorted(i.fields["category"] for i in found) == ["facts", "personas"]
            assert len({i.id for i in found}) == len(found)
            assert [i.score for i in found] == sorted((i.score for i in found), reverse=True)
            searches = [r for r in fake.requests if r["response_format"]["json_schema"]["name"] == "memt_policy_search"]
            assert len(searches) == 4
    anyio.run(main)


def test_react_search_stops_after_six_steps(settings, fake):
    fake.on("memt_policy_search", lambda body: {"action": "search_turns", "query": "tea"})

    async def main():
        async with adapter_runtime("memt", settings, fake) as (make, rt):
            memt = make()
            await memt.observe(Event("task_start", "I like tea.", 1, 0))
            found = await memt.search("tea", 3)
            assert [i.content for i in found] == ["[Task 1] I like tea."]
            searches = [r for r in fake.requests if r["response_format"]["json_schema"]["name"] == "memt_policy_search"]
            assert len(searches) == 6
    anyio.run(main)
