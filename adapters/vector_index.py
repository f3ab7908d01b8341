"""One embedding index for every system that ranks items by cosine similarity.

Items are kept by id in insertion order (replacing an item keeps its place), each with the text that
represents it for embedding. Vectors come from the shared cached Embedder, so restoring a snapshot or
re-adding a text never runs the encoder twice. The stacked matrix is rebuilt only after a change, so a
search over a stable store is one matrix product plus a stable top-k (ties keep insertion order)."""
from __future__ import annotations

import numpy as np

from memaudit.llm.embed import Embedder, top_k


class VectorIndex:
    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self._vectors: dict[str, np.ndarray] = {}
        self._matrix: np.ndarray | None = None
        self._ids: list[str] = []

    def __len__(self) -> int:
        return len(self._vectors)

    async def put(self, pairs: list[tuple[str, str]]) -> None:
        """Add or replace items given as (id, embedding text), embedded in one batch."""
        if not pairs:
            return
        vectors = await self.embedder.embed([text for _, text in pairs])
        for (item_id, _), vector in zip(pairs, vectors):
            self._vectors[item_id] = vector
        self._matrix = None

    def remove(self, item_id: str) -> None:
        if self._vectors.pop(item_id, None) is not None:
            self._matrix = None

    def clear(self) -> None:
        self._vectors.clear()
        self._matrix = None

    async def query_vector(self, query: str) -> np.ndarray:
        return (await self.embedder.embed([query]))[0]

    async def nearest(self, query: str, k: int) -> list[tuple[str, float]]:
        """The k most similar item ids with their cosine scores, best first."""
        if not self._vectors or k <= 0:
            return []
        return self.nearest_to(await self.query_vector(query), k)

    def nearest_to(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        if self._matrix is None:
            self._ids = list(self._vectors)
            self._matrix = np.stack([self._vectors[i] for i in self._ids]) if self._ids else np.zeros((0, 0))
        return [(self._ids[i], score) for i, score in top_k(self._matrix, vector, k)]
