"""`nomem`: the baseline without memory. It stores nothing and has no retrieve mode."""
from __future__ import annotations

from memaudit.adapters.base import Event, MemoryAdapter
from memaudit.types import MemoryItem


class NoMemory(MemoryAdapter):
    name = "nomem"
    reply_prompt = "agent_plain"
    supports_retrieve = False
    memory_calls = False

    async def observe(self, event: Event) -> None:
        return None

    async def search(self, query: str, k: int) -> list[MemoryItem]:
        return []

    def dump(self) -> list[dict]:
        return []

    def snapshot(self) -> dict:
        return self.state_header()

    async def restore(self, state: dict) -> None:
        self.load_header(state)

    async def load_items(self, items: list[dict]) -> None:
        return None
