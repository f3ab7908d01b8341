"""`bm25`: the same items as `simple_rag`, ranked lexically with Okapi BM25.

A short exact implementation rather than a library: the maintained BM25 packages either pull in
heavy dependencies or index a fixed corpus at once, while a memory grows and changes one item at a
time. Scoring is textbook Okapi BM25 (k1 = 1.5, b = 0.75) with the non-negative idf
log(1 + (N - df + 0.5) / (df + 0.5)); tokens are lower-cased word characters. Items sharing no
term with the query have no lexical evidence and are not returned, so a search may return fewer
than k items."""
from __future__ import annotations

import math
import re
from collections import Counter

from memaudit.adapters.simple_rag import SimpleRag

TOKEN = re.compile(r"\w+")
K1 = 1.5
B = 0.75


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


class BM25Index:
    """Term statistics kept up to date as items are added, replaced and removed."""

    def __init__(self):
        self._tf: dict[str, Counter] = {}
        self._length: dict[str, int] = {}
        self._df: Counter = Counter()

    def __len__(self) -> int:
        return len(self._tf)

    async def put(self, pairs: list[tuple[str, str]]) -> None:
        for item_id, text in pairs:
            tokens = tokenize(text)
            if item_id in self._tf:
                self._df.subtract(self._tf[item_id].keys())
            self._tf[item_id] = Counter(tokens)  # a replaced item keeps its place
            self._length[item_id] = len(tokens)
            self._df.update(self._tf[item_id].keys())

    def remove(self, item_id: str) -> None:
        if item_id in self._tf:
            self._df.subtract(self._tf.pop(item_id).keys())
            del self._length[item_id]

    def clear(self) -> None:
        self._tf.clear()
        self._length.clear()
        self._df.clear()

    async def nearest(self, query: str, k: int) -> list[tuple[str, float]]:
        if not self._tf or k <= 0:
            return []
        n = len(self._tf)
        avg_length = sum(self._length.values()) / n or 1.0
        idf = {t: math.log(1 + (n - self._df[t] + 0.5) / (self._df[t] + 0.5)) for t in set(tokenize(query))}
        terms = tokenize(query)
        scored = []
        for item_id, tf in self._tf.items():
            norm = K1 * (1 - B + B * self._length[item_id] / avg_length)
            score = sum(idf[t] * tf[t] * (K1 + 1) / (tf[t] + norm) for t in terms if tf[t])
            if score > 0:
                scored.append((item_id, score))
        scored.sort(key=lambda pair: -pair[1])  # stable: ties keep insertion order
        return scored[:k]


class BM25Memory(SimpleRag):
    name = "bm25"

    def make_index(self):
        return BM25Index()
