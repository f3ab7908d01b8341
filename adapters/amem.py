"""`amem`: A-Mem, an agentic note memory.

Each message from the user (the task text and each reply) becomes a note. A construction call
gives it ≥3 keywords, a one-sentence context and ≥3 tags (the note metadata of the A-Mem paper);
its 5 nearest notes are found by the note's raw content, as published, against an index that
embeds every note's content enriched with its context, keywords and tags; an evolution call then
may `strengthen` (link the new note to chosen neighbours, replace its tags) and/or
`update_neighbor` (rewrite a neighbour's context and tags). Neighbours are addressed by their
position in the list the model was shown and mapped back to ids one by one, so each rewrite lands
on the neighbour it names; an index outside the list is logged in `bad_indices` and skipped.

Both calls run at temperature 1.0, the published library's default. If the construction call
fails, the note keeps the published defaults (no keywords or tags, context "General") and
evolution still runs, as published: the message is not lost, the failure is counted.

The dump has the published fields (id, content, keywords, context, tags, category, timestamp);
links are kept apart in the state (`links`: note id -> linked ids), not in the dump."""
from __future__ import annotations

from memaudit.adapters.base import Event
from memaudit.adapters.indexed import IndexedMemory
from memaudit.adapters.memory_calls import memory_call
from memaudit.roles import BOOL, NONEMPTY, obj

NEIGHBOURS = 5
TEMPERATURE = 1.0
DEFAULT_CONTEXT = "General"  # the published note's context before (or without) analysis
SOURCE = {"task_start": "task", "user": "user"}
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
    result_fields = ("id", "content", "keywords", "context", "tags", "category", "score")
    prompts = ("memory_amem_note", "memory_amem_evolve")
    extra_state = ("bad_indices", "links")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.bad_indices: list[dict] = []
        self.links: dict[str, list[str]] = {}

    def rank_text(self, item: dict) -> str:
        # The published index text: content, then context (unless the default), keywords and tags
        # when present. .get: a published dump loaded for `memory search` may lack some fields.
        text = item["content"]
        if item.get("context") and item["context"] != DEFAULT_CONTEXT:
            text += f" context: {item['context']}"
        if item.get("keywords"):
            text += f" keywords: {', '.join(item['keywords'])}"
        if item.get("tags"):
            text += f" tags: {', '.join(item['tags'])}"
        return text

    async def observe(self, event: Event) -> None:
        if event.kind not in SOURCE:
            return
        note = {"content": event.text, "keywords": [], "context": DEFAULT_CONTEXT, "tags": [],
                "category": SOURCE[event.kind], "timestamp": event.clock}
        analysis = await memory_call(self, "memory:amem_note", "memory_amem_note", schema=NOTE_SCHEMA,
                                     clock=event.clock, temperature=TEMPERATURE,
                                     seed_parts=self.seed_parts(event.task_index, event.turn, "note"),
                                     content=event.text)
        if analysis is not None:
            note.update(keywords=analysis["keywords"], context=analysis["context"], tags=analysis["tags"])
        links = await self._evolve(event, note)
        content = note.pop("content")
        item = await self.add(content, **note)
        if links:
            self.links[item["id"]] = links

    async def _evolve(self, event: Event, note: dict) -> list[str]:
        """Run the evolution call; the ids the new note links to."""
        neighbours = [i for i, _ in await self.index.nearest(note["content"], NEIGHBOURS)]
        if not neighbours:
            return []
        shown = "\n\n".join(f"[{n}]\n{describe(self.items[i])}" for n, i in enumerate(neighbours))
        data = await memory_call(self, "memory:amem_evolve", "memory_amem_evolve", schema=EVOLVE_SCHEMA,
                                 clock=event.clock, temperature=TEMPERATURE,
                                 seed_parts=self.seed_parts(event.task_index, event.turn, "evolve"),
                                 neighbours=shown, note=describe(note))
        if data is None:
            return []
        links = []
        if data["strengthen"]:
            links = [neighbours[n] for n in self._valid(event, data["links"], len(neighbours))]
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
        return links

    def _valid(self, event: Event, indices: list[int], size: int) -> list[int]:
        valid = []
        for n in indices:
            if 0 <= n < size:
                if n not in valid:
                    valid.append(n)
            else:
                self.bad_indices.append({"clock": event.clock, "index": n})
        return valid
