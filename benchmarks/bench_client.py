"""Benchmarks for the model client and call cache (issue 2).

    .venv/bin/python benchmarks/bench_client.py

Prints: harness overhead per call with a zero-latency transport (target <= 1 ms/call),
wall time of 1,000 independent calls at concurrency 64 against a 100 ms fake (target within
1.5x of 1000 * 0.1 / 64 s), and replay throughput over 100,000 cached calls (target >= 5,000/s).

    .venv/bin/python benchmarks/bench_client.py --embedded

measures the real embedded server instead (SmolLM2-135M, 2 threads): a structured call with a
~1.2k-token prompt, cold, then the same long prefix with a new question (prefix cache), then a
short call.
"""
from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import anyio
import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.config import load_settings  # noqa: E402
from memaudit.llm.client import LLM  # noqa: E402
from memaudit.store import open_store  # noqa: E402

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
          "additionalProperties": False}


def instant_transport(latency: float = 0.0) -> httpx.MockTransport:
    """A fake endpoint that answers every structured call at once (or after `latency` s)."""
    answer = orjson.dumps({"answer": "ok"}).decode()
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5}}

    async def handle(request: httpx.Request) -> httpx.Response:
        if latency:
            await anyio.sleep(latency)
        return httpx.Response(200, json=body)
    return httpx.MockTransport(handle)


def settings_for(db: Path, *, concurrency: int = 64, cache: str = "rw"):
    s = load_settings(db=db, base_url="http://bench.test/v1", model="bench-model", backend="openai",
                      concurrency=concurrency, cache=cache, env={})
    return replace(s, backoff_base=0.001, backoff_cap=0.01)


def messages(i: int) -> list[dict]:
    return [{"role": "system", "content": "You answer in JSON."},
            {"role": "user", "content": f"Question number {i}: what is the answer?"}]


async def run_calls(llm: LLM, n: int, *, concurrency: int) -> None:
    limiter = anyio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with limiter:
            await llm.call("agent", messages(i), schema=SCHEMA, seed_parts=(i,))

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)


async def overhead(tmp: Path, n: int = 2000) -> float:
    async with open_store(tmp / "overhead.db") as store:
        llm = LLM(settings_for(tmp / "overhead.db", concurrency=1), store, transport=instant_transport())
        start = time.perf_counter()
        for i in range(n):
            await llm.call("agent", messages(i), schema=SCHEMA, seed_parts=(i,))
        await store.flush()
        took = time.perf_counter() - start
        await llm.aclose()
    return took / n * 1000


async def concurrent(tmp: Path, n: int = 1000, conc: int = 64, latency: float = 0.1) -> tuple[float, float]:
    async with open_store(tmp / "concurrent.db") as store:
        llm = LLM(settings_for(tmp / "concurrent.db", concurrency=conc), store,
                  transport=instant_transport(latency))
        start = time.perf_counter()
        await run_calls(llm, n, concurrency=n)
        await store.flush()
        took = time.perf_counter() - start
        await llm.aclose()
    return took, n * latency / conc


async def replay(tmp: Path, n: int = 100_000) -> float:
    db = tmp / "replay.db"
    async with open_store(db) as store:
        llm = LLM(settings_for(db, concurrency=256), store, transport=instant_transport())
        await run_calls(llm, n, concurrency=256)
        await llm.aclose()
    async with open_store(db) as store:
        llm = LLM(settings_for(db, cache="replay"), store)
        start = time.perf_counter()
        await run_calls(llm, n, concurrency=256)
        took = time.perf_counter() - start
        await llm.aclose()
    return n / took


async def embedded(tmp: Path) -> None:
    from memaudit.config import EMBEDDED_MODEL
    from memaudit.llm.server import embedded_server
    prefix = ("You help one traveller plan trips. They live in Ohio, like quiet towns, dislike long drives, "
              "travel with a small dog, cook their own meals and keep to a modest budget. ") * 24
    asks = [("cold, ~1.2k-token prompt", prefix, "Suggest one city for a weekend in May."),
            ("same prefix, new question", prefix, "Suggest one city for a weekend in October."),
            ("short prompt", "You answer briefly.", "Name one quiet lake town.")]
    async with embedded_server(threads=2, log_path=tmp / "server.log") as server:
        settings = load_settings(db=tmp / "embedded.db", base_url=server.url, model=EMBEDDED_MODEL, backend="llamacpp",
                                 env={})
        async with open_store(settings.db) as store:
            llm = LLM(settings, store)
            for label, system, question in asks:
                start = time.perf_counter()
                result = await llm.call("agent", [{"role": "system", "content": system},
                                                  {"role": "user", "content": question}],
                                        schema=SCHEMA, max_tokens=40)
                print(f"embedded, {label}: {time.perf_counter() - start:.2f} s, "
                      f"{result.usage.get('prompt_tokens')} prompt tokens")
            await llm.aclose()


async def main() -> None:
    if "--embedded" in sys.argv:
        with tempfile.TemporaryDirectory() as d:
            await embedded(Path(d))
        return
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ms = await overhead(tmp)
        print(f"harness overhead: {ms:.3f} ms/call (target <= 1 ms)")
        wall, ideal = await concurrent(tmp)
        print(f"1000 calls @ concurrency 64, 100 ms fake: {wall:.2f} s wall, ideal {ideal:.2f} s, "
              f"ratio {wall / ideal:.2f} (target <= 1.5)")
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
        rate = await replay(tmp, n)
        print(f"replay of {n} cached calls: {rate:,.0f} calls/s (target >= 5,000)")


if __name__ == "__main__":
    anyio.run(main)
