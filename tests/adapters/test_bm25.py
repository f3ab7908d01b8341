"""bm25: exact Okapi BM25 scores, stable ties, no zero-evidence results, updates kept consistent."""
from __future__ import annotations

import math

import anyio

from memaudit.adapters.bm25 import B, K1, BM25Index


def reference(docs: list[list[str]], query: list[str]) -> list[float]:
    n = len(docs)
    avg = sum(map(len, docs)) / n
    scores = []
    for doc in docs:
        score = 0.0
        for term in query:
            df = sum(term in d for d in docs)
            tf = doc.count(term)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(doc) / avg))
        scores.append(score)
    return scores


def test_scores_are_exact_okapi():
    texts = {"a": "the cat sat on the mat", "b": "dogs chase the cat", "c": "a dog and a cat and a cat",
             "d": "nothing relevant here"}

    async def main():
        index = BM25Index()
        await index.put(list(texts.items()))
        found = await index.nearest("Cat, dog!", 10)
        expected = reference([t.split() for t in texts.values()], ["cat", "dog"])
        by_id = dict(zip(texts, expected))
        assert [i for i, _ in found] == sorted((i for i in texts if by_id[i] > 0), key=lambda i: -by_id[i])
        for item_id, score in found:
            assert math.isclose(score, by_id[item_id])
        assert "d" not in dict(found)
    anyio.run(main)


def test_replace_and_remove_keep_statistics_consistent():
    async def main():
        index = BM25Index()
        await index.put([("a", "tea tea"), ("b", "coffee"), ("c", "tea")])
        await index.put([("a", "coffee")])
        index.remove("c")
        fresh = BM25Index()
        await fresh.put([("a", "coffee"), ("b", "coffee")])
        assert await index.nearest("coffee tea", 5) == await fresh.nearest("coffee tea", 5)
        assert [i for i, _ in await index.nearest("coffee", 5)] == ["a", "b"]  # tie: insertion order
    anyio.run(main)
