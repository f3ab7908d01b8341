"""Benchmarks for the model client and call cache (issues 2 and 12), over real loopback HTTP.

    .venv/bin/python perf/client.py [REPLAY_CALLS]

The fake server runs in its own process (perf/loopback.py), so this process's CPU time is
the harness's: every call goes through `LLM.call` (key, cache lookup, single-flight, the HTTP
session, JSON, the store writer). Prints:
- throughput against a zero-latency server at 1, 16, 64, 256 and 512 calls in flight, with the
  client's and the server's CPU per call (target: >= 1,000 calls/s at 64, no collapse at 512);
- 1,000 calls at 64 in flight against a 100 ms server (target <= 1.3x of 1000 * 0.1 / 64 s);
- replay throughput over REPLAY_CALLS cached calls (default 20,000; target >= 5,000/s).

    .venv/bin/python perf/client.py --embedded

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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf.loopback import server_process, server_stats  # noqa: E402
from memaudit.config import load_settings  # noqa: E402
from memaudit.llm.client import LLM  # noqa: E402
from memaudit.roles import AGENT  # noqa: E402
from memaudit.store import open_store  # noqa: E402

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
          "additionalProperties": False}
LEVELS = (1, 16, 64, 256, 512)


def settings_for(db: Path, url: str, *, concurrency: int = 64, cache: str = "rw"):
    s = load_settings(db=db, base_url=url, model="bench-model", backend="openai",
                      concurrency=concurrency, cache=cache, env={})
    return replace(s, backoff_base=0.001, backoff_cap=0.01)


def messages(i: int) -> list[dict]:
    return [{"role": "system", "content": "You answer in JSON."},
            {"role": "user", "content": f"Question number {i}: what is the answer?"}]


async def run_calls(llm: LLM, n: int, *, in_flight: int) -> None:
    """`n` distinct calls, `in_flight` at a time."""
    queue = iter(range(n))

    async def worker() -> None:
        for i in queue:
            await llm.call(AGENT, messages(i), schema=SCHEMA, seed_parts=(i,))

    async with anyio.create_task_group() as tg:
        for _ in range(in_flight):
            tg.start_soon(worker)


async def timed_calls(db: Path, url: str, n: int, in_flight: int) -> tuple[float, float, float]:
    """(wall seconds, client CPU seconds, server CPU seconds) of `n` calls into a fresh store."""
    async with open_store(db) as store:
        llm = LLM(settings_for(db, url, concurrency=in_flight), store)
        server_before = server_stats(url)["cpu_seconds"]
        start, cpu = time.perf_counter(), time.process_time()
        await run_calls(llm, n, in_flight=in_flight)
        await store.flush()
        wall, used = time.perf_counter() - start, time.process_time() - cpu
        await llm.aclose()
    return wall, used, server_stats(url)["cpu_seconds"] - server_before


async def throughput(tmp: Path) -> None:
    with server_process(0.0) as url:
        for level in LEVELS:
            n = max(2000, 8 * level)
            wall, client, server = await timed_calls(tmp / f"level{level}.db", url, n, level)
            print(f"0 ms server, {level:3d} in flight: {n / wall:6.0f} calls/s, client CPU "
                  f"{client / n * 1000:.3f} ms/call, server CPU {server / n * 1000:.3f} ms/call", flush=True)


async def concurrent(tmp: Path, n: int = 1000, in_flight: int = 64, latency: float = 0.1) -> None:
    with server_process(latency) as url:
        wall, client, _ = await timed_calls(tmp / "concurrent.db", url, n, in_flight)
        seen = server_stats(url)["max_in_flight"]
    ideal = n * latency / in_flight
    print(f"{n} calls @ {in_flight} in flight, {latency * 1000:.0f} ms server: {wall:.2f} s wall, ideal "
          f"{ideal:.2f} s, ratio {wall / ideal:.2f} (target <= 1.3); client CPU {client:.2f} s; "
          f"server saw {seen} in flight")


async def replay(tmp: Path, n: int) -> float:
    db = tmp / "replay.db"
    with server_process(0.0) as url:
        await timed_calls(db, url, n, 256)
    async with open_store(db) as store:
        llm = LLM(settings_for(db, "http://127.0.0.1:9/v1", cache="replay"), store)  # nothing listens there
        start = time.perf_counter()
        await run_calls(llm, n, in_flight=256)
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
                result = await llm.call(AGENT, [{"role": "system", "content": system},
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
        await throughput(tmp)
        await concurrent(tmp)
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
        rate = await replay(tmp, n)
        print(f"replay of {n} cached calls: {rate:,.0f} calls/s (target >= 5,000)")


if __name__ == "__main__":
    anyio.run(main)
