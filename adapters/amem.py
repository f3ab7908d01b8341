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
links are kept apart in the state (`links`: note id -> linked ids), not in the dump.

With the published pack (`--prompts` from `memaudit prompts import-published`, which reads A-Mem's
requests from the A-mem-sys the published checkout vendors), both calls are A-Mem's own: its system
line, analysis and evolution prompts, response formats, neighbours shown by id as A-Mem lists them,
and the answers applied as A-Mem applies them (`should_evolve`; `strengthen` links the suggested
ids and replaces the note's tags; `update_neighbor` rewrites the neighbours' tags and contexts in
list order). A-Mem took an invalid answer as it came: with the pack a call is not repaired (the
note keeps the defaults, or no evolution happens; the failure is counted). A pack that records
A-Mem's notes (`notes` in its layout: every pack imported since issue 45) also gives uuid-shaped
ids, derived like every id, and indexes an empty context as A-Mem did; a run made with an older
pack replays as it was made. Without the pack our own wording and JSON stay (docs/fidelity.md M-rows)."""
from __future__ import annotations

import uuid

from memaudit.adapters.base import Event
from memaudit.adapters.indexed import IndexedMemory
from memaudit.adapters.memory_calls import memory_call
from memaudit.prompts import fill, rollout_layout
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


def neighbour_values(item: dict) -> dict:
    """A neighbour as A-Mem's evolution prompt lists it: lists as Python writes them (`str(list)`)."""
    return {"id": item["id"], "timestamp": item["timestamp"], "content": item["content"],
            "context": item["context"], "keywords": str(item["keywords"]), "tags": str(item["tags"])}


class AMem(IndexedMemory):
    name = "amem"
    ITEM_KIND = "note"
    result_fields = ("id", "content", "keywords", "context", "tags", "category", "score")
    published_result = {"category": ""}  # A-Mem's search returns no category; the scorer showed ""
    prompts = ("memory_amem_note", "memory_amem_evolve")
    extra_state = ("bad_indices", "links")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.bad_indices: list[dict] = []
        self.links: dict[str, list[str]] = {}
        # A-Mem's own requests, when the prompt directory is a published pack holding them.
        layout = rollout_layout(ctx.llm.settings.prompts_dir) if ctx.llm is not None else None
        self.published: dict | None = (layout or {}).get("amem")

    @property
    def notes(self) -> dict:
        """How A-Mem made and indexed notes, as the pack records it ({} without one, or an older pack)."""
        return (self.published or {}).get("notes", {})

    def new_id(self, content: str) -> str:
        if self.notes.get("id") == "uuid4":  # A-Mem's note ids are uuid4 strings: the same shape, derived
            return str(uuid.UUID(hex=self.id_digest(content)[:32], version=4))
        return super().new_id(content)

    def rank_text(self, item: dict) -> str:
        # The published index text: content, then context (unless the default), keywords and tags
        # when present. .get: a published dump loaded for `memory search` may lack some fields.
        # A-Mem indexed an empty context too (" context: "); memaudit's own notes never have one.
        text = item["content"]
        context = item.get("context")
        indexed = bool(context) or (context == "" and self.notes.get("empty_context_indexed", False))
        if indexed and context != DEFAULT_CONTEXT:
            text += f" context: {context}"
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
        analysis = await self._call(event, "note", NOTE_SCHEMA, content=event.text)
        if analysis is not None:  # A-Mem's schema requires nothing: what is missing keeps its default
            note.update(keywords=analysis.get("keywords", []), context=analysis.get("context", DEFAULT_CONTEXT),
                        tags=analysis.get("tags", []))
        links = await (self._evolve if self.published is None else self._evolve_published)(event, note)
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
        data = await self._call(event, "evolve", EVOLVE_SCHEMA, neighbours=shown, note=describe(note))
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

    async def _call(self, event: Event, call: str, schema: dict, **values) -> dict | None:
        """The analysis (`note`) or evolution (`evolve`) call: ours, or A-Mem's own with the pack (its
        prompt file of the same name, its schema under its own name)."""
        published = (self.published or {}).get(call)
        return await memory_call(self, f"memory:amem_{call}", f"memory_amem_{call}", clock=event.clock,
                                 schema=schema if published is None else published["schema"],
                                 schema_name=None if published is None else published["name"],
                                 temperature=TEMPERATURE, repairs=None if published is None else 0,
                                 seed_parts=self.seed_parts(event.task_index, event.turn, call), **values)

    async def _evolve_published(self, event: Event, note: dict) -> list[str]:
        """A-Mem's evolution: its neighbours listed by id, its answer applied as A-Mem applies it; the
        ids the new note links to (as the model wrote them)."""
        neighbours = [i for i, _ in await self.index.nearest(note["content"], NEIGHBOURS)]
        if not neighbours:
            return []
        shown = "".join(fill(self.published["neighbour"], neighbour_values(self.items[i])) for i in neighbours)
        data = await self._call(event, "evolve", EVOLVE_SCHEMA, context=note["context"], content=note["content"],
                                keywords=str(note["keywords"]), neighbours=shown, count=len(neighbours))
        if data is None or not data["should_evolve"]:
            return []
        links = []
        for action in data["actions"]:
            if action == "strengthen":
                links.extend(data["suggested_connections"])
                note["tags"] = data["tags_to_update"]
            elif action == "update_neighbor":
                contexts, tags = data["new_context_neighborhood"], data["new_tags_neighborhood"]
                for n in range(min(len(neighbours), len(tags))):
                    neighbour = self.items[neighbours[n]]
                    neighbour["tags"] = tags[n]
                    if n < len(contexts):
                        neighbour["context"] = contexts[n]
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
