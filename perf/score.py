"""Benchmarks for recovery scoring (issues 6 and 12): `memaudit score` as a CLI process, start-up
included, against the loopback fake server in its own process.

    .venv/bin/python perf/score.py [--repeat N]

First a finished `longctx_full` rollout of the bundled sample (3 users x 31 tasks) is prepared
(perf/sample_run.py). Then, each on a fresh copy of that store:
1. `score --mode dump_all` (186 calls) against a 100 ms server at `--concurrency 64` and at
   `--concurrency 1`: the speed-up (target >= 20x) and the most requests the server saw in flight
   (target >= 64).
2. `score --mode both --k 1,3,5,10` (about 930 calls) at `--concurrency 256` against a 0 ms and a
   200 ms server: the time the latency adds against the ideal calls / 256 x 200 ms (target within
   2x), the most in flight (target >= 200), and the harness time per call at 0 ms, start-up
   included (target <= 3 ms).
With --repeat N each measurement is taken N times and the best is kept (a shared machine).
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf.loopback import ROOT, server_process, server_stats  # noqa: E402
from perf.sample_run import fresh_copy, prepare  # noqa: E402

RUN = "longctx_full"


def score(url: str, db: Path, concurrency: int, *args: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `memaudit score` process. Its CPU time, unlike its wall
    time, hardly depends on what else the machine is running."""
    # As installed: bytecode is cached (an environment that forbids it recompiles every module at
    # each start), and no endpoint settings leak in from the caller's environment.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMAUDIT_", "OPENAI_")) and k != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, str(ROOT / "memaudit.py"), "score", *args, "--runs", RUN,
               "--concurrency", str(concurrency), "--base-url", url, "--model", "fake", "--db", str(db)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"score failed: {done.stderr.strip()}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(prepared: Path, tmp: Path, latency: float, concurrency: int, args: tuple, repeat: int) -> dict:
    """Best wall time over `repeat` runs, each on a fresh server and a fresh copy of the store."""
    best: dict | None = None
    for i in range(repeat):
        with server_process(latency) as url:
            db = fresh_copy(prepared, tmp / f"{latency}-{concurrency}-{'_'.join(args)}-{i}" / "m.db")
            wall, cpu = score(url, db, concurrency, *args)
            stats = server_stats(url)
        if best is None or wall < best["wall"]:
            best = {"wall": wall, "cpu": cpu, "calls": stats["requests"], "max_in_flight": stats["max_in_flight"]}
    return best


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        prepared = tmp / "prepared.db"
        await prepare(prepared)
        measure(prepared, tmp, 0.0, 64, ("--mode", "dump_all"), 1)  # warm-up: bytecode and file caches

        dump = ("--mode", "dump_all")
        parallel = measure(prepared, tmp, 0.1, 64, dump, args.repeat)
        serial = measure(prepared, tmp, 0.1, 1, dump, args.repeat)
        speedup = serial["wall"] / parallel["wall"]
        print(f"score --mode dump_all, {parallel['calls']} calls, 100 ms server, CLI process:")
        print(f"  --concurrency 64: {parallel['wall']:6.2f} s, {parallel['cpu']:.2f} s CPU (server saw "
              f"{parallel['max_in_flight']} in flight, target >= 64)")
        print(f"  --concurrency 1:  {serial['wall']:6.2f} s, {serial['cpu']:.2f} s CPU")
        print(f"  speed-up:         {speedup:6.1f}x (target >= 20x) {'PASS' if speedup >= 20 else 'FAIL'}")

        sweep = ("--mode", "both", "--k", "1,3,5,10")
        zero = measure(prepared, tmp, 0.0, 256, sweep, args.repeat)
        slow = measure(prepared, tmp, 0.2, 256, sweep, args.repeat)
        added, ideal = slow["wall"] - zero["wall"], slow["calls"] / 256 * 0.2
        per_call = zero["wall"] / zero["calls"] * 1000
        print(f"score --mode both --k 1,3,5,10, {zero['calls']} calls, --concurrency 256, CLI process:")
        print(f"  0 ms server:   {zero['wall']:6.2f} s = {per_call:.2f} ms of harness per call, start-up included "
              f"(target <= 3 ms) {'PASS' if per_call <= 3 else 'FAIL'}; CPU {zero['cpu']:.2f} s = "
              f"{zero['cpu'] / zero['calls'] * 1000:.2f} ms per call")
        print(f"  200 ms server: {slow['wall']:6.2f} s (server saw {slow['max_in_flight']} in flight, target >= 200)")
        print(f"  latency added: {added:6.2f} s against the ideal {ideal:.2f} s = {added / ideal:.2f}x "
              f"(target <= 2x) {'PASS' if added <= 2 * ideal else 'FAIL'}")


if __name__ == "__main__":
    anyio.run(main)
