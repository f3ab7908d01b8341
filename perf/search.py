"""Search benchmark for the embedding adapters (issue 4).

1. Search latency over a 500-item longctx_full store after its items are embedded: the queries are
   embedded first (reported separately), so the figure is the search itself (≤ 5 ms/query).
2. A scoring-style retrieve pass: a 150-item store restored from its snapshot, 31 queries; the
   encoder must run once per distinct text (150 items + 31 queries), a second pass not at all, and a
   fresh process reading the same store's vector cache not at all.

Uses the real all-MiniLM-L6-v2 encoder. Run: .venv/bin/python perf/search.py"""
from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.adapters.base import AdapterContext, Event  # noqa: E402
from memaudit.adapters.longctx_full import LongContextFull, prefixed  # noqa: E402
from memaudit.llm.embed import Embedder, load_sentence_model  # noqa: E402
from memaudit.store import open_store  # noqa: E402

SUBJECTS = ["my knee", "the Python script", "our sprint review", "my sister's wedding", "the tax return",
            "a 10k race", "the sourdough starter", "my thesis draft", "the garden shed", "a job interview"]
VERBS = ["keeps failing", "went better than expected", "needs a plan", "worries me", "took all weekend",
         "is due on Friday", "reminded me of last year", "needs short answers", "was a disaster", "is on track"]
DETAILS = ["since I switched to night shifts", "because I am new to this", "even after reading the docs",
           "and I prefer step-by-step help", "while travelling in Portugal", "with my old laptop",
           "after the physio session", "before my manager noticed", "using the notes you gave me", "again"]


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(DETAILS)} (note {i})."
            for i in range(n)]


def events(n: int):
    """n items as a longctx_full store sees them: tasks with replies and user messages."""
    texts = sentences(n, seed=1)
    task, turn = 0, 0
    for text in texts:
        if turn == 0:
            task += 1
            yield Event("task_start", text, task, 0)
            turn = 1
            continue
        yield Event("assistant" if turn % 2 else "user", text, task, (turn + 1) // 2)
        turn = 0 if turn == 4 else turn + 1


async def build(n: int, embedder: Embedder) -> LongContextFull:
    """The store after n observed events; its texts are embedded in one batch first (as a restore
    does), since one encoder call per item measures the encoder, not the search."""
    adapter = LongContextFull(AdapterContext(None, embedder, scope=f"bench/{n}"))
    await embedder.embed([prefixed(event) for event in events(n)])
    for event in events(n):
        await adapter.observe(event)
    assert len(adapter.dump()) == n
    return adapter


async def latency() -> None:
    embedder = Embedder(None)
    started = time.perf_counter()
    adapter = await build(500, embedder)
    print(f"500-item store: embedded {embedder.encode_count} texts in {time.perf_counter() - started:.1f} s")
    queries = sentences(200, seed=2)
    started = time.perf_counter()
    await embedder.embed(queries)
    encode = (time.perf_counter() - started) / len(queries) * 1000
    await adapter.search(queries[0], 5)  # builds the matrix once, as the first real search would
    started = time.perf_counter()
    for query in queries:
        found = await adapter.search(query, 5)
        assert len(found) == 5
    per_query = (time.perf_counter() - started) / len(queries) * 1000
    print(f"query encoding (batched, reported separately): {encode:.2f} ms/query")
    print(f"search over 500 items, k=5: {per_query:.3f} ms/query over {len(queries)} queries "
          f"[target <= 5 ms: {'ok' if per_query <= 5 else 'MISSED'}]")


async def scoring_pass(db: Path) -> None:
    async with open_store(db) as store:
        state = (await build(150, Embedder(store))).snapshot()
        await store.flush()
    queries = [f"What does the user say about this? {s}" for s in sentences(31, seed=3)]
    # A scoring process with its own in-memory embedder (no vector store behind it): every text it
    # needs goes through the encoder exactly once, however often it is restored and searched.
    embedder = Embedder(None)
    adapter = LongContextFull(AdapterContext(None, embedder, scope="bench/150"))

    async def one_pass() -> None:
        await adapter.restore(state)
        for query in queries:
            await adapter.search(query, 5)

    await one_pass()
    first = embedder.encode_count
    await one_pass()
    print(f"31-query pass over 150 items: encode_count = {first} (150 items + {len(set(queries))} queries "
          f"= {150 + len(set(queries))}); a second restore + pass adds {embedder.encode_count - first}")
    async with open_store(db) as store:
        cached = Embedder(store)
        adapter = LongContextFull(AdapterContext(None, cached, scope="bench/150"))
        await adapter.restore(state)
        print(f"restore in a new process reading the store's vector cache: encode_count = {cached.encode_count}")


def main() -> None:
    started = time.perf_counter()
    load_sentence_model()
    print(f"model load: {time.perf_counter() - started:.1f} s")
    anyio.run(latency)
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(scoring_pass, Path(tmp) / "bench.db")


if __name__ == "__main__":
    main()
