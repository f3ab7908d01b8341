"""A real loopback HTTP server that answers like `FakeOpenAI`, for tests that run the CLI in a
subprocess (`--base-url http://127.0.0.1:P/v1`).

In a test:      with serve(FakeOpenAI()) as url: ...
Stand-alone:    python -m memaudit.testing.http_server --port P --latency 0.05 [--reasoning]
                (prints its base URL; answers are FakeOpenAI's schema-driven defaults; with
                --reasoning it refuses requests as a hosted reasoning model does)"""
from __future__ import annotations

import argparse
import re
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson

from memaudit.testing.fake_openai import FakeOpenAI

PREFERENCE_LINE = re.compile(r"^\[(\d+)\] ", re.M)


def rate_every_preference(body: dict) -> dict:
    """A pref_judge answer that varies with the prompt: one rating per `[n]` preference line."""
    prompt = body["messages"][-1]["content"]
    count = len(PREFERENCE_LINE.findall(prompt))
    return {"ratings": {str(i): str(1 + (len(prompt) + i) % 5) for i in range(1, count + 1)}, "summary": "rated"}


def _handler(fake: FakeOpenAI, latency: float):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # keep test output clean
            return None

        def _send(self, status: int, payload: dict) -> None:
            data = orjson.dumps(payload)
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"data": [{"id": "fake"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            body = orjson.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            if latency:
                time.sleep(latency)
            fake.requests.append(body)
            refused = fake.refusal(body)
            status, payload = (400, refused) if refused is not None else (200, fake.completion(body, fake.answer(body)))
            fake.status_counts[status] += 1
            self._send(status, payload)
    return Handler


@contextmanager
def serve(fake: FakeOpenAI | None = None, *, port: int = 0, latency: float = 0.0):
    """Serve `fake` (default: a plain FakeOpenAI) on loopback; yields the base URL ending in /v1."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(fake or FakeOpenAI(), latency))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per chat completion")
    parser.add_argument("--reasoning", action="store_true", help="behave like a hosted reasoning model")
    args = parser.parse_args()
    with serve(FakeOpenAI(reasoning=args.reasoning), port=args.port, latency=args.latency) as url:
        print(url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
