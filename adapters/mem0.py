"""`mem0`: the classic Mem0 pipeline.

For every message from the user (the task text and each reply) one call extracts atomic facts;
for each fact the 5 most similar memories are retrieved; all of them are shown to one decision call
under short integer ids ("0", "1", …), which answers ADD / UPDATE / DELETE / NONE per fact. Ids are
mapped back to real ones; an id the model invented (or one already deleted in this batch) is logged
in `unknown_ids` and skipped. Every applied change is appended to `history`.

The extraction call sees the user's message only, as the published study wrote it to Mem0: no
assistant reply, so the system never stores what the assistant said. Its prompt asks for the kinds
of facts Mem0's authors list (preferences, personal details, plans, activities, health,
professional details …)."""
from __future__ import annotations

import re

from memaudit.adapters.base import Event
from memaudit.adapters.indexed import IndexedMemory
from memaudit.adapters.memory_calls import memory_call
from memaudit.roles import NONEMPTY, STR, obj

NEIGHBOURS = 5
SOURCE = {"task_start": "task", "user": "user_reply"}
EVENTS = ("ADD", "UPDATE", "DELETE", "NONE")

EXTRACT_SCHEMA = obj(facts={"type": "array", "items": NONEMPTY})
DECIDE_SCHEMA = obj(decisions={"type": "array", "items": obj(
    fact={"type": "integer"}, event={"type": "string", "enum": list(EVENTS)}, id=STR, text=STR)})


def has_words(text: str) -> bool:
    """Small models sometimes echo the format's placeholder ("..."): that is no fact to store."""
    return re.search(r"\w", text) is not None


def numbered(lines: list[str]) -> str:
    return "\n".join(f"{i}. {line}" for i, line in enumerate(lines)) or "(none)"


class Mem0(IndexedMemory):
    name = "mem0"
    ITEM_KIND = "memory"
    result_fields = ("id", "content", "category", "metadata", "timestamp")
    prompts = ("memory_mem0_extract", "memory_mem0_decide")
    extra_state = ("history", "unknown_ids")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.history: list[dict] = []
        self.unknown_ids: list[dict] = []

    async def observe(self, event: Event) -> None:
        if event.kind not in SOURCE:  # only the user's words: the task text and each reply
            return
        facts = await self._extract(event)
        if facts:
            await self._decide(event, facts)

    async def _extract(self, event: Event) -> list[str]:
        data = await memory_call(self, "memory:mem0_extract", "memory_mem0_extract", schema=EXTRACT_SCHEMA,
                                 clock=event.clock,
                                 seed_parts=self.seed_parts(event.task_index, event.turn, "extract"),
                                 message=event.text)
        return [f.strip() for f in data["facts"] if has_words(f)] if data else []

    async def _decide(self, event: Event, facts: list[str]) -> None:
        shown: list[str] = []  # real ids in the order they get their short ids
        for fact in facts:
            for item_id, _ in await self.index.nearest(fact, NEIGHBOURS):
                if item_id not in shown:
                    shown.append(item_id)
        memories = "\n".join(f'[{short}] {self.items[item_id]["content"]}' for short, item_id in enumerate(shown))
        data = await memory_call(self, "memory:mem0_decide", "memory_mem0_decide", schema=DECIDE_SCHEMA,
                                 clock=event.clock,
                                 seed_parts=self.seed_parts(event.task_index, event.turn, "decide"),
                                 memories=memories or "(no memories yet)", facts=numbered(facts))
        if data is None:
            return
        real = dict(enumerate(shown))
        for decision in data["decisions"]:
            await self._apply(event, decision, real)

    async def _apply(self, event: Event, decision: dict, real: dict[int, str]) -> None:
        op, text = decision["event"], decision["text"].strip()
        if op == "NONE" or (op in ("ADD", "UPDATE") and not has_words(text)):
            return
        if op == "ADD":
            item = await self.add(text, category=SOURCE[event.kind],
                                  metadata={"task_index": event.task_index, "turn": event.turn, "updated": None},
                                  timestamp=event.clock)
            self.history.append({"op": "ADD", "id": item["id"], "old": None, "new": text, "clock": event.clock})
            return
        short = decision["id"].strip()
        item_id = real.get(int(short)) if short.isdigit() else None
        if item_id is None or item_id not in self.items:
            self.unknown_ids.append({"clock": event.clock, "event": op, "id": decision["id"]})
            return
        item = self.items[item_id]
        if op == "UPDATE":
            self.history.append({"op": "UPDATE", "id": item_id, "old": item["content"], "new": text,
                                 "clock": event.clock})
            item["content"] = text
            item["metadata"]["updated"] = event.clock
            await self.reindex(item)
        else:
            self.history.append({"op": "DELETE", "id": item_id, "old": item["content"], "new": None,
                                 "clock": event.clock})
            self.remove(item_id)
