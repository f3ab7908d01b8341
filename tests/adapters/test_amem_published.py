"""`amem` with the published pack sends A-Mem's own requests and applies the answers as A-Mem does
(issue 35 item 1). The pack is built from the stand-in checkout (tests/rollout/stand_in_rollout.py
`AMEM`: A-Mem's structure, our own text); the expected requests come from running the stand-in's
own code with stubs, so what memaudit sends is compared with what that code sends, byte for byte:
the system line, the user message, the response format (name, schema in its order, strictness)."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from types import SimpleNamespace

import anyio

from memaudit.adapters.base import Event
from memaudit.published.pack import import_published
from memaudit.testing.fake_openai import schema_of
from tests.adapters.conftest import adapter_runtime
from tests.rollout.stand_in_rollout import AMEM
from tests.scoring.stand_in import write_stand_in

# A uuid4 string, as A-Mem's note ids are (memaudit derives its own from the run's scope).
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
NOTES = ["I keep bees on the roof of my flat.", "My hives need checking every week in summer.",
         "I sell the honey at the Saturday market."]


def analysis(content: str) -> dict:
    words = re.findall(r"[a-z]+", content.lower())
    return {"tags": ["hobby", words[-1]], "keywords": words[:3], "context": f"About {words[-1]}."}


def evolution(prompt: str) -> dict:
    """Link the first neighbour, give the new note no tags, rewrite the first neighbour."""
    ids = re.findall(r"#([\w-]+) \|", prompt)
    return {"actions": ["strengthen", "update_neighbor"], "should_evolve": True,
            "suggested_connections": [ids[0], "no-such-id"], "tags_to_update": [],
            "new_context_neighborhood": [f"Rewritten near {len(ids)}."], "new_tags_neighborhood": [["bees", "city"]]}


def answer(body) -> dict:
    prompt = body["messages"][-1]["content"]
    if "should_evolve" in schema_of(body)["properties"]:
        return evolution(prompt)
    return analysis(prompt.rsplit("\n", 1)[-1].strip())


def stand_in_requests(neighbours: list[dict], note: dict, answered=None) -> tuple[dict, dict]:
    """The (analysis, evolution) requests the stand-in A-Mem sends for `note` with `neighbours`
    found: its own code run with a recording client (answering as `answered`, default `answer`) and
    a retriever returning them."""
    scope: dict = {}
    for source in AMEM.values():
        exec(compile(source, "stand-in", "exec"), scope)  # our own stand-in text
    sent = []

    class Client:
        def complete(self, **request):
            sent.append(request)
            found = (answered or answer)(request)
            return found if isinstance(found, str) else json.dumps(found)

    retriever = SimpleNamespace(search=lambda query, k: {"ids": [[n["id"] for n in neighbours]],
                                                         "metadatas": [neighbours]})
    system = scope["AgenticMemorySystem"](retriever, scope["OpenAIController"](Client(), "fake-model"))
    system.analyze_content(note["content"])
    system.process_memory(SimpleNamespace(**note))
    return sent[0], sent[1]


def as_sent(request: dict) -> dict:
    return {"messages": request["messages"], "response_format": request["response_format"],
            "temperature": request["temperature"]}


def test_amem_sends_a_mems_requests_and_applies_its_answers(settings, fake, tmp_path):
    pack = tmp_path / "pack"
    import_published(write_stand_in(tmp_path / "checkout"), pack)
    fake.on("reply", answer)

    async def main():
        async with adapter_runtime("amem", replace(settings, prompts_dir=pack), fake) as (make, rt):
            amem = make()
            await amem.observe(Event("task_start", NOTES[0], 1, 0))
            await amem.observe(Event("user", NOTES[1], 1, 1))
            first, second = amem.dump()
            # A-Mem's way: the first neighbour rewritten, the new note linked as the model wrote it
            # (an unknown id too) and its tags replaced by the empty list it was given.
            assert (first["context"], first["tags"]) == ("Rewritten near 1.", ["bees", "city"])
            assert second["tags"] == [] and amem.links == {second["id"]: [first["id"], "no-such-id"]}
            assert all(UUID.fullmatch(note["id"]) for note in (first, second))  # A-Mem's id shape
            neighbours = [dict(amem.items[i]) for i, _ in await amem.index.nearest(NOTES[2], 5)]
            before = len(fake.requests)
            await amem.observe(Event("user", NOTES[2], 1, 2))
            return neighbours, fake.requests[before:]

    neighbours, requests = anyio.run(main)
    found = analysis(NOTES[2])
    note_request, evolve_request = stand_in_requests(
        neighbours, {"content": NOTES[2], "context": found["context"], "keywords": found["keywords"]})
    assert [as_sent(r) for r in requests] == [as_sent(note_request), as_sent(evolve_request)]
    # The analysis schema requires nothing, so it goes without `strict`, as A-Mem sent it; the
    # evolution schema is strict in A-Mem and here. Fields keep A-Mem's order.
    assert "strict" not in requests[0]["response_format"]["json_schema"]
    assert requests[1]["response_format"]["json_schema"]["strict"] is True
    assert list(schema_of(requests[0])["properties"]) == ["tags", "keywords", "context"]


def test_an_invalid_analysis_is_taken_as_a_mem_took_it_without_a_repair(settings, fake, tmp_path):
    """A-Mem asked once: an answer that is not JSON gave its default metadata and evolution went on
    with it. With the pack memaudit sends exactly the stand-in's two requests (no repair request in
    between), stores the defaults and counts the failure."""
    pack = tmp_path / "pack"
    import_published(write_stand_in(tmp_path / "checkout"), pack)

    def rambling(body):
        if "should_evolve" in schema_of(body)["properties"] or NOTES[1] not in body["messages"][-1]["content"]:
            return answer(body)
        return "Sure! This note is about checking hives, tags: bees, summer."

    fake.on("reply", rambling)

    async def main():
        async with adapter_runtime("amem", replace(settings, prompts_dir=pack), fake) as (make, rt):
            amem = make()
            await amem.observe(Event("task_start", NOTES[0], 1, 0))
            neighbours = [dict(amem.items[i]) for i, _ in await amem.index.nearest(NOTES[1], 5)]
            before = len(fake.requests)
            await amem.observe(Event("user", NOTES[1], 1, 1))
            return neighbours, fake.requests[before:], amem.dump()[1], amem.failures.write_failures

    neighbours, requests, note, failures = anyio.run(main)
    defaults = {"context": "General", "keywords": []}
    expected = stand_in_requests(neighbours, {"content": NOTES[1], **defaults}, rambling)
    assert [as_sent(r) for r in requests] == [as_sent(r) for r in expected]
    assert (note["keywords"], note["context"], failures) == ([], "General", 1)


def test_an_empty_context_is_indexed_as_a_mem_indexed_it(settings, fake, tmp_path):
    pack = tmp_path / "pack"
    import_published(write_stand_in(tmp_path / "checkout"), pack)
    fake.on("reply", lambda body: {**answer(body), "context": ""} if "tags" in schema_of(body)["properties"]
            else answer(body))

    async def main():
        async with adapter_runtime("amem", replace(settings, prompts_dir=pack), fake) as (make, rt):
            amem = make()
            await amem.observe(Event("task_start", NOTES[0], 1, 0))
            return amem.rank_text(amem.dump()[0])

    assert anyio.run(main).startswith(f"{NOTES[0]} context:  keywords: ")


def test_the_pack_records_where_a_mems_requests_were_read(tmp_path):
    manifest = import_published(write_stand_in(tmp_path / "checkout"), tmp_path / "pack")
    assert manifest["published"]["memory_amem_note"].startswith(
        "A-mem-sys/agentic_memory/memory_system.py AgenticMemorySystem.analyze_content")
    assert "_evolution_system_prompt" in manifest["published"]["memory_amem_evolve"]
    header = (tmp_path / "pack" / "memory_amem_evolve.md").read_text().split("---")[1]
    assert "role: memory (amem)" in header and "verbatim: true" in header


def test_without_the_pack_amem_keeps_its_own_requests(settings, fake):
    async def main():
        async with adapter_runtime("amem", settings, fake) as (make, rt):
            await make().observe(Event("task_start", NOTES[0], 1, 0))
    anyio.run(main)
    assert fake.requests[0]["response_format"]["json_schema"]["name"] == "memory_amem_note"


def test_a_pack_imported_before_a_mems_notes_were_recorded_keeps_the_earlier_ids(settings, fake, tmp_path):
    """A run made with such a pack replays as it was made: its ids are the 16-hex ones."""
    pack = tmp_path / "pack"
    import_published(write_stand_in(tmp_path / "checkout"), pack)
    layout = json.loads((pack / "rollout_layout.json").read_text())
    del layout["amem"]["notes"]
    (pack / "rollout_layout.json").write_text(json.dumps(layout))
    fake.on("reply", answer)

    async def main():
        async with adapter_runtime("amem", replace(settings, prompts_dir=pack), fake) as (make, rt):
            amem = make()
            await amem.observe(Event("task_start", NOTES[0], 1, 0))
            return amem.dump()[0]["id"]
    assert re.fullmatch(r"[0-9a-f]{16}", anyio.run(main))
