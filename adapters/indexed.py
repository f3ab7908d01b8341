"""The shared shape of systems that keep a flat list of items and rank them by similarity.

An item is a dict with `id`, `content` and the system's native fields, kept in insertion order.
Subclasses decide what to write (`observe`), what text represents an item for ranking
(`rank_text`), and which extra state to keep; snapshot/restore, search, dump and loading a dumped
store are the same for all of them."""
from __future__ import annotations

from typing import ClassVar

import orjson

from memaudit.adapters.base import AdapterContext, MemoryAdapter
from memaudit.adapters.vector_index import VectorIndex
from memaudit.errors import BadInput
from memaudit.types import MemoryItem


def as_memory_item(item: dict, score: float | None) -> MemoryItem:
    fields = {k: v for k, v in item.items() if k not in ("id", "content")}
    return MemoryItem(item["id"], item["content"], score, fields)


def deep_copy(value):
    return orjson.loads(orjson.dumps(value))


class IndexedMemory(MemoryAdapter):
    # Attributes (JSON-able) that belong to the state besides items, ids and failures.
    extra_state: ClassVar[tuple[str, ...]] = ()

    def __init__(self, ctx: AdapterContext):
        super().__init__(ctx)
        self.items: dict[str, dict] = {}
        self.index = self.make_index()

    def make_index(self):
        return VectorIndex(self.embedder)

    def rank_text(self, item: dict) -> str:
        return item["content"]

    # -- changes -----------------------------------------------------------------------------
    async def add(self, content: str, **fields) -> dict:
        item = {"id": self.new_id(content), "content": content, **fields}
        self.items[item["id"]] = item
        await self.index.put([(item["id"], self.rank_text(item))])
        return item

    async def reindex(self, item: dict) -> None:
        """Call after changing an item's content or any field its rank text uses."""
        await self.index.put([(item["id"], self.rank_text(item))])

    def remove(self, item_id: str) -> None:
        del self.items[item_id]
        self.index.remove(item_id)

    # -- read paths --------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        return [as_memory_item(self.items[i], score) for i, score in await self.index.nearest(query, k)]

    def dump(self) -> list[dict]:
        return deep_copy(list(self.items.values()))

    # -- state -------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        state = {**self.state_header(), "items": list(self.items.values())}
        state.update({name: getattr(self, name) for name in self.extra_state})
        return deep_copy(state)

    async def restore(self, state: dict) -> None:
        state = deep_copy(state)
        self.load_header(state)
        for name in self.extra_state:
            setattr(self, name, state[name])
        await self._replace_items(state["items"])

    async def load_items(self, items: list[dict]) -> None:
        loaded = []
        for n, raw in enumerate(items, 1):
            if not isinstance(raw, dict) or not isinstance(raw.get("content"), str):
                raise BadInput(f"memory {n} needs a string 'content'", field="content")
            item = {k: v for k, v in raw.items() if k != "score"}
            item["id"] = str(item["id"]) if item.get("id") is not None else self.new_id(item["content"])
            loaded.append(item)
        ids = [item["id"] for item in loaded]
        if len(set(ids)) != len(ids):
            raise BadInput("dumped store has duplicate memory ids", field="id")
        await self._replace_items(loaded)

    async def _replace_items(self, items: list[dict]) -> None:
        self.items = {item["id"]: item for item in items}
        self.index.clear()
        await self.index.put([(item["id"], self.rank_text(item)) for item in items])
