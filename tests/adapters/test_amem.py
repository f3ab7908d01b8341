"""amem's evolution policy, pinned with a scripted model: the neighbour the model names by its
list index is the one rewritten; links point at the chosen neighbours; bad indices are skipped."""
from __future__ import annotations

import re

import anyio

from memaudit.adapters.base import Event
from tests.adapters.conftest import adapter_runtime

NOTES = ["I use Python for data analysis at work.", "I enjoy hiking in the Alps on weekends.",
         "I prefer short answers with code first."]
NEW = "Weekend hiking with friends is my favourite way to relax, and I log my routes with Python."


def analyse(body):
    words = re.findall(r"[a-z]+", body["messages"][-1]["content"].rsplit("\n", 1)[-1].lower())
    return {"keywords": words[:3], "context": "A note about the user.", "tags": ["user", "note", words[0]]}


def index_of(body, word: str) -> int:
    shown = body["messages"][-1]["content"].split("New note:", 1)[0]
    for index, block in re.findall(r"^\[(\d+)\]\n(content: .*)$", shown, re.M):
        if word in block:
            return int(index)
    raise AssertionError(f"no neighbour with {word!r}")


def evolve(body):
    if "favourite" not in body["messages"][-1]["content"]:
        return {"strengthen": False, "links": [], "tags": [], "update_neighbor": False, "neighbor_updates": []}
    python, hiking = index_of(body, "Python"), index_of(body, "hiking")
    return {"strengthen": True, "links": [hiking, 9], "tags": ["hiking", "python", "leisure"],
            "update_neighbor": True,
            "neighbor_updates": [{"index": python, "context": "Python is also a hobby tool for the user.",
                                  "tags": ["python", "hobby"]},
                                 {"index": 7, "context": "nowhere", "tags": []}]}


def test_update_neighbor_rewrites_the_named_note(settings, fake):
    fake.on("memory_amem_note", analyse)
    fake.on("memory_amem_evolve", evolve)

    async def main():
        async with adapter_runtime("amem", settings, fake) as (make, rt):
            amem = make()
            await amem.observe(Event("task_start", NOTES[0], 1, 0))
            for turn, text in enumerate(NOTES[1:] + [NEW], 1):
                await amem.observe(Event("assistant", "ok", 1, turn))
                await amem.observe(Event("user", text, 1, turn))
            python, hiking, short, new = amem.dump()
            assert python["context"] == "Python is also a hobby tool for the user."
            assert python["tags"] == ["python", "hobby"]
            for untouched in (hiking, short):
                assert untouched["context"] == "A note about the user."
            assert amem.links == {new["id"]: [hiking["id"]]}  # kept in the state, not in the dump
            assert new["tags"] == ["hiking", "python", "leisure"]
            assert set(new) == {"id", "content", "keywords", "context", "tags", "category", "timestamp"}
            assert [n["category"] for n in (python, hiking, short, new)] == ["task", "user", "user", "user"]
            # Both calls at the published library's temperature; neighbours found by raw content.
            calls = [r for r in fake.requests if r["response_format"]["json_schema"]["name"].startswith("memory_amem")]
            assert {r["temperature"] for r in calls} == {1.0}
            assert amem.bad_indices == [{"clock": "task001.turn03", "index": 9},
                                        {"clock": "task001.turn03", "index": 7}]
            # The rewritten neighbour is re-embedded with its new context.
            found = await amem.search("hobby tool", 1)
            assert found[0].id == python["id"]
    anyio.run(main)
