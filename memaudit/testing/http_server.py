"""A real loopback HTTP server that answers like `FakeOpenAI`, for tests that run the CLI in a
subprocess (`--base-url http://127.0.0.1:P/v1`) and for the performance scripts.

In a test:      with serve(FakeOpenAI()) as url: ...
Stand-alone:    python -m memaudit.testing.http_server --port P --latency 0.05 [--fake MODULE:FUNCTION]
                [--reasoning]
                (prints its base URL; answers are FakeOpenAI's schema-driven defaults, or those
                of the FakeOpenAI that FUNCTION returns; with --reasoning it refuses requests as a
                hosted reasoning model does)

It is one asyncio event loop (in a background thread, or the main thread stand-alone) speaking
just enough HTTP/1.1 with keep-alive: a request waits for its latency without holding a thread,
so hundreds of requests can be in flight at once and the server is not what a benchmark measures
(a thread per connection costs more CPU per request than the client under test). `GET /_stats`
reports the requests served, the most that were in flight at once and the server's CPU seconds.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import re
import threading
import time
from contextlib import contextmanager

from memaudit.llm.http1 import read_request, send_json, write_body
from memaudit.roles import PREF_JUDGE
from memaudit.testing import fake_generator
from memaudit.testing.adapter_contract import any_library_json, any_library_json_text, any_library_tool_calls
from memaudit.testing.fake_batches import FakeBatchAPI
from memaudit.testing.fake_openai import FakeOpenAI, schema_of

PREFERENCE_LINE = re.compile(r"^\[(\d+)\] ", re.M)


def rate_every_preference(body: dict) -> dict:
    """A pref_judge answer that varies with the prompt: one rating per `[n]` preference line, or,
    asked in the published pack's shape, one per item its schema asks for."""
    prompt = body["messages"][-1]["content"]
    per_pref = (schema_of(body) or {}).get("properties", {}).get("per_pref")
    if per_pref is not None:
        return {"per_pref": [{"idx": i, "score": 1 + (len(prompt) + i) % 5, "reason": "rated"}
                             for i in range(1, per_pref["minItems"] + 1)]}
    count = len(PREFERENCE_LINE.findall(prompt))
    return {"ratings": {str(i): str(1 + (len(prompt) + i) % 5) for i in range(1, count + 1)}, "summary": "rated"}


def scripted_fake() -> FakeOpenAI:
    """The model `memaudit serve --fake` serves: every structured role answered in its schema's
    shape (deterministic in the prompt), ratings for every preference line, the generator's roles
    so that their checks pass (memaudit/testing/fake_generator.py), the tool calls and JSON answers
    a deployed library's adapter declares (`fake_tool_calls`, `fake_json`, `fake_text`), and a plain
    reply for the assistant; the Files and Batches endpoints too (`--batch`: a batch completes on the
    second look). Instant and free (but for the first library call: every library's adapter is imported);
    its numbers mean nothing."""
    fake = FakeBatchAPI().on(PREF_JUDGE, rate_every_preference)
    for name, answer in fake_generator.HANDLERS.items():
        fake.on(name, answer)
    fake.tool_chooser = any_library_tool_calls  # a deployed library's tool loop ends as its adapter declares
    fake.on_json_object(any_library_json)  # a library's JSON-mode calls, answered in its prompt's format
    return fake.on_text(any_library_json_text(
        lambda body: f"Here is a plan in three steps, written after {len(body['messages'])} messages."))


class LoopbackServer:
    """The asyncio side: parses requests, waits out the latency, answers through `fake.reply`."""

    def __init__(self, fake: FakeOpenAI, latency: float):
        self.fake = fake
        self.latency = latency
        self.requests = 0
        self.completions = 0  # live chat completions (a batch's lines are answered inside the fake)
        self.in_flight = 0
        self.max_in_flight = 0

    def stats(self) -> dict:
        return {"requests": self.requests, "completions": self.completions, "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight, "cpu_seconds": time.process_time()}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await read_request(reader)) is not None:
                method, path, headers, body = request
                if not await self.respond(writer, method, path, headers, body):
                    return
                if headers.get("connection", "").lower() == "close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        except asyncio.CancelledError:
            # the server is shutting down (_shutdown): end quietly, or asyncio's own callback on this
            # connection's task logs the cancellation as an error on stderr
            return
        finally:
            writer.close()

    async def respond(self, writer, method: str, path: str, headers: dict, body: bytes) -> bool:
        """Write one response; False when the connection must be dropped (an injected timeout)."""
        if method == "GET" and path == "/_stats":
            send_json(writer, 200, self.stats())
            return True
        self.requests += 1
        self.completions += method == "POST" and path.split("?")[0].rstrip("/").endswith("/chat/completions")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency and method == "POST":
                await asyncio.sleep(self.latency)
            reply = self.fake.reply_http(method, path, headers, body)
        finally:
            self.in_flight -= 1
        if reply is None:
            return False
        status, payload, extra = reply
        if isinstance(payload, bytes):  # a file's content (the Files API fake)
            write_body(writer, status, payload, "application/octet-stream", extra)
        else:
            send_json(writer, status, payload, extra)
        await writer.drain()
        return True


@contextmanager
def serve(fake: FakeOpenAI | None = None, *, port: int = 0, latency: float | None = None):
    """Serve `fake` (default: a plain FakeOpenAI) on loopback from a background thread; yields the
    base URL ending in /v1. `latency` defaults to the fake's own."""
    fake = fake or FakeOpenAI()
    server = LoopbackServer(fake, fake.latency if latency is None else latency)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    bound: dict = {}

    async def start():
        listener = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=1024)
        bound["listener"] = listener
        bound["port"] = listener.sockets[0].getsockname()[1]
        ready.set()

    def run():
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait()
    try:
        yield f"http://127.0.0.1:{bound['port']}/v1"
    finally:
        asyncio.run_coroutine_threadsafe(_shutdown(bound["listener"]), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()


async def _shutdown(listener: asyncio.Server) -> None:
    """Stop listening and end the open connections, so no task outlives the loop."""
    listener.close()
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def stats_url(base_url: str) -> str:
    """Where a server started by `serve` reports its counters."""
    return base_url.rsplit("/v1", 1)[0] + "/_stats"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per chat completion")
    parser.add_argument("--fake", default=None, help="MODULE:FUNCTION returning the FakeOpenAI to serve")
    parser.add_argument("--reasoning", action="store_true", help="behave like a hosted reasoning model")
    args = parser.parse_args()
    fake = FakeOpenAI()
    if args.fake:
        module, function = args.fake.split(":")
        fake = getattr(importlib.import_module(module), function)()
    fake.reasoning = fake.reasoning or args.reasoning
    with serve(fake, port=args.port, latency=args.latency) as url:
        print(url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
