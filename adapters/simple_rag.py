"""`simple_rag`: the raw user and assistant messages, ranked by embedding similarity (top-k).

No model calls on the write path: each message (the task counts as the user's first message) is one
item with its role and logical time."""
from __future__ import annotations

from memaudit.adapters.base import Event
from memaudit.adapters.indexed import IndexedMemory

ROLE = {"task_start": "user", "assistant": "assistant", "user": "user"}


class SimpleRag(IndexedMemory):
    name = "simple_rag"
    ITEM_KIND = "message"
    memory_calls = False

    async def observe(self, event: Event) -> None:
        if event.kind == "episode_end":
            return
        await self.add(event.text, role=ROLE[event.kind], task_index=event.task_index, turn=event.turn,
                       timestamp=event.clock)
