"""Which HTTP client to build the transport on (issue 12): raw POSTs of a chat-completions body
over real loopback HTTP, with httpx, httpx2 and aiohttp, at 1 to 512 requests in flight.

    .venv/bin/python perf/http_clients.py [--latency 0] [--clients httpx,httpx2,aiohttp]

Prints, per client and level: calls/s, the client's CPU per call (this process) and the server's
CPU per call (the server runs in its own process; if its CPU per call times calls/s approaches
one core, the server is the limit, not the client).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf.loopback import server_process, server_stats  # noqa: E402

LEVELS = (1, 16, 64, 256, 512)
BODY = {"model": "bench", "messages": [{"role": "system", "content": "You answer in JSON."},
                                       {"role": "user", "content": "Question: what is the answer?"}],
        "temperature": 0.0, "seed": 1}
CONTENT = orjson.dumps(BODY)  # every client sends the same bytes
JSON = {"content-type": "application/json"}


def httpx_like(module):
    async def session(url: str, limit: int):
        client = module.AsyncClient(base_url=url, timeout=60.0,
                                    limits=module.Limits(max_connections=limit, max_keepalive_connections=limit))

        async def post() -> dict:
            resp = await client.post("/chat/completions", content=CONTENT, headers=JSON)
            return resp.json()
        return post, client.aclose
    return session


async def aiohttp_session(url: str, limit: int):
    import aiohttp
    client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit, limit_per_host=limit),
                                   timeout=aiohttp.ClientTimeout(total=60))

    async def post() -> dict:
        async with client.post(url + "/chat/completions", data=CONTENT, headers=JSON) as resp:
            return orjson.loads(await resp.read())
    return post, client.close


def sessions() -> dict:
    """The candidates that are installed (httpx2 is not a dependency of memaudit)."""
    import importlib
    found = {"aiohttp": aiohttp_session}
    for name in ("httpx", "httpx2"):
        try:
            found[name] = httpx_like(importlib.import_module(name))
        except ImportError:
            print(f"{name} is not installed: skipped")
    return found


async def measure(open_session, url: str, in_flight: int, calls: int) -> tuple[float, float, float]:
    post, close = await open_session(url, in_flight)
    await post()  # warm one connection
    queue = iter(range(calls))
    before = server_stats(url)["cpu_seconds"]

    async def worker():
        for _ in queue:
            await post()
    start, cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(in_flight):
            tg.start_soon(worker)
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    server = server_stats(url)["cpu_seconds"] - before
    await close()
    return calls / wall, used / calls * 1000, server / calls * 1000


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--clients", default="httpx,httpx2,aiohttp")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    available = sessions()
    with server_process(args.latency) as url:
        print(f"loopback server latency {args.latency * 1000:.0f} ms; {args.calls} calls per level")
        for name in [n for n in args.clients.split(",") if n in available]:
            for level in LEVELS:
                calls = max(args.calls, level * 4)
                rate, client_ms, server_ms = await measure(available[name], url, level, calls)
                print(f"{name:8s} in flight {level:4d}: {rate:7.0f} calls/s, client CPU {client_ms:.3f} ms/call, "
                      f"server CPU {server_ms:.3f} ms/call", flush=True)


if __name__ == "__main__":
    anyio.run(main)
