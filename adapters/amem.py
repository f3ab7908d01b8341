"""`amem`: A-Mem, an agentic note memory.

Each message from the user (the task text and each reply) becomes a note. A construction call
gives it ≥3 keywords, a one-sentence context and ≥3 tags; its 5 nearest notes are found by
embedding the note's content enriched with context, keywords and tags; an evolution call then may
`strengthen` (link the new note to chosen neighbours, replace its tags) and/or `update_neighbor`
(rewrite a neighbour's context and tags). Neighbours are addressed by their position in the list
the model was shown and mapped back to ids one by one, so each rewrite lands on the neighbour it
names; an index outside the list is logged in `bad_indices` and skipped.

If the construction call fails the note is still stored verbatim (without keywords, context or
tags) and no evolution happens: the message is not lost, the failure is counted."""
from __future__ import annotations

from memaudit.adapters.base import Event
from memaudit.adapters.indexed import IndexedMemory
from memaudit.adapters.memory_calls import memory_call
from memaudit.roles import BOOL, NONEMPTY, obj

NEIGHBOURS = 5
SOURCE = {"task_start": "task", "user": "user_reply"}
WORDS = {"type": "array", "items": NONEMPTY}
WORDS3 = {"type": "array", "items": NONEMPTY, "minItems": 3}

NOTE_SCHEMA = obj(keywords=WORDS3, context=NONEMPTY, tags=WORDS3)
EVOLVE_SCHEMA = obj(strengthen=BOOL, links={"type": "array", "items": {"type": "integer"}}, tags=WORDS,
                    update_neighbor=BOOL,
                    neighbor_updates={"type": "array", "items": obj(index={"type": "integer"}, context=NONEMPTY,
                                                                    tags=WORDS)})


def describe(note: dict) -> str:
    return (f"content: {note['content']}\ncontext: {note['context']}\n"
            f"keywords: {', '.join(note['keywords'])}\ntags: {', '.join(note['tags'])}")


class AMem(IndexedMemory):
    name = "amem"
    prompts = ("memory_amem_note", "memory_amem_evolve")
    extra_state = ("bad_indices",)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.bad_indices: list[dict] = []

    def rank_text(self, item: dict) -> str:
        # .get: a published dump loaded for `memory search` may lack some of the fields.
        return (f"{item['content']} context: {item.get('context', '')} "
                f"keywords: {', '.join(item.get('keywords', []))} tags: {', '.join(item.get('tags', []))}")

    async def observe(self, event: Event) -> None:
        if event.kind not in SOURCE:
            return
        note = {"content": event.text, "keywords": [], "context": "", "tags": [], "links": [],
                "category": SOURCE[event.kind], "timestamp": event.clock}
        analysis = await memory_call(self, "memory:amem_note", "memory_amem_note", schema=NOTE_SCHEMA,
                                     max_tokens=300, clock=event.clock,
                                     seed_parts=self.seed_parts(event.task_index, event.turn, "note"),
                                     content=event.text)
        if analysis is not None:
            note.update(keywords=analysis["keywords"], context=analysis["context"], tags=analysis["tags"])
            await self._evolve(event, note)
        content = note.pop("content")
        await self.add(content, **note)

    async def _evolve(self, event: Event, note: dict) -> None:
        neighbours = [i for i, _ in await self.index.nearest(self.rank_text(note), NEIGHBOURS)]
        if not neighbours:
            return
        shown = "\n\n".join(f"[{n}]\n{describe(self.items[i])}" for n, i in enumerate(neighbours))
        data = await memory_call(self, "memory:amem_evolve", "memory_amem_evolve", schema=EVOLVE_SCHEMA,
                                 max_tokens=800, clock=event.clock,
                                 seed_parts=self.seed_parts(event.task_index, event.turn, "evolve"),
                                 neighbours=shown, note=describe(note))
        if data is None:
            return
        if data["strengthen"]:
            note["links"] = [neighbours[n] for n in self._valid(event, data["links"], len(neighbours))]
            if data["tags"]:
                note["tags"] = data["tags"]
        if data["update_neighbor"]:
            for update in data["neighbor_updates"]:
                if self._valid(event, [update["index"]], len(neighbours)):
                    neighbour = self.items[neighbours[update["index"]]]
                    neighbour["context"] = update["context"]
                    if update["tags"]:
                        neighbour["tags"] = update["tags"]
                    await self.reindex(neighbour)

    def _valid(self, event: Event, indices: list[int], size: int) -> list[int]:
        valid = []
        for n in indices:
            if 0 <= n < size:
                if n not in valid:
                    valid.append(n)
            else:
                self.bad_indices.append({"clock": event.clock, "index": n})
        return valid
