"""Benchmark for the README's one-minute tour (issue 21): the newcomer's path with no build and no
key, timed as users run it — each step a `memaudit` CLI process, the model `memaudit serve --fake`
on real loopback HTTP.

    .venv/bin/python perf/fake_tour.py

Prints the wall time of every step and the total (the tour's promise: about a minute), then checks
that a bare `memaudit replay`, with the server stopped, prints `identical`. It also prints how long
a command takes to give up on a hung endpoint with `--timeout 1` (the setting that replaces the
default ≈ 70 minutes: 600 s × 7 attempts).
"""
from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEMAUDIT = [sys.executable, str(REPO / "memaudit.py")]
TOUR = [
    ["rollout", "--bench", "sample", "--systems", "nomem,bm25", "--users", "2", "--tasks", "2",
     "--max-turns", "3", "--quiet"],
    ["score", "--mode", "both", "--dims", "targeted"],
    ["tables", "--only", "table2"],
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step(args: list[str], db: Path, extra: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([*MEMAUDIT, *args, "--db", str(db), *extra], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.strip()}")
    return elapsed, done.stdout


def tour(folder: Path) -> None:
    db, port = folder / "tour.db", free_port()
    start = time.perf_counter()
    server = subprocess.Popen([*MEMAUDIT, "serve", "--fake", "--port", str(port)], stderr=subprocess.PIPE, text=True)
    server.stderr.readline()  # "serving the scripted fake model on …"
    print(f"serve --fake ready: {time.perf_counter() - start:6.2f} s")
    flags = ["--base-url", f"http://127.0.0.1:{port}/v1", "--model", "fake"]
    try:
        for args in TOUR:
            elapsed, _ = step(args, db, flags)
            print(f"{' '.join(args[:1]):<14}{elapsed:6.2f} s")
    finally:
        server.terminate()
        server.wait()
    elapsed, out = step(["replay"], db, [])
    print(f"{'replay':<14}{elapsed:6.2f} s   -> {out.strip()}")
    print(f"{'tour total':<14}{time.perf_counter() - start:6.2f} s")


def hung_endpoint(folder: Path) -> None:
    """A server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held = []
    threading.Thread(target=lambda: [held.append(listener.accept()) for _ in iter(int, 1)], daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    start = time.perf_counter()
    done = subprocess.run([*MEMAUDIT, "rollout", "--bench", "sample", "--systems", "nomem", "--users", "1",
                           "--tasks", "1", "--quiet", "--db", str(folder / "hung.db"), "--base-url", url,
                           "--model", "m", "--timeout", "1"], capture_output=True, text=True)
    print(f"hung endpoint, --timeout 1: gave up after {time.perf_counter() - start:6.2f} s "
          f"(exit {done.returncode}: {done.stderr.strip().splitlines()[-1][:100]})")


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        tour(Path(folder))
        hung_endpoint(Path(folder))


if __name__ == "__main__":
    main()
