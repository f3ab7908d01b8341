"""The loopback fake server as a separate process, for the performance scripts: the client under
test then owns its process's CPU time, and the server reports its own through `GET /_stats`."""
from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def server_process(latency: float = 0.0, fake: str | None = None):
    """Start the stand-alone server (`python -m memaudit.testing.http_server`) with `latency` and
    optionally `fake` (MODULE:FUNCTION building its FakeOpenAI); yields its base URL."""
    command = [sys.executable, "-c", "from memaudit.testing.http_server import main; main()", "--latency", str(latency)]
    proc = subprocess.Popen(command + (["--fake", fake] if fake else []), cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        if not url:
            raise RuntimeError("the loopback server did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def server_stats(url: str) -> dict:
    """Requests served, the most in flight at once, and the server's CPU seconds so far."""
    return httpx.get(url.rsplit("/v1", 1)[0] + "/_stats").json()
