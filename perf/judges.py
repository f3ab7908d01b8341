"""What a judge panel costs (issue 24): `memaudit score --mode dump_all` as a CLI process against
the loopback fake server (100 ms per call, its own process), with the one configured judge and
with a panel of three (`--judges a,b,c`), each on a fresh copy of a finished rollout of the bundled
sample (3 users x 31 tasks; benchmarks/sample_run.py).

    .venv/bin/python perf/bench_judges.py [--concurrency 64] [--repeat N]

Prints calls and wall time of both and the panel's cost relative to one judge. A panel adds two
judge calls per target, asked concurrently with the first: at enough concurrency its wall time
stays close to 1x while its calls grow by the judge share of the work.
"""
from __future__ import annotations

import argparse
import os
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
LATENCY = 0.1


def score(url: str, db: Path, concurrency: int, *args: str) -> float:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMAUDIT_", "OPENAI_")) and k != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, str(ROOT / "memaudit.py"), "score", "--mode", "dump_all", "--runs", RUN, *args,
               "--concurrency", str(concurrency), "--base-url", url, "--model", "fake", "--db", str(db)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"score failed: {done.stderr.strip()}")
    return took


def measure(prepared: Path, tmp: Path, name: str, concurrency: int, args: tuple, repeat: int) -> dict:
    """Best wall time over `repeat` runs, each on a fresh server and a fresh copy of the store."""
    best: dict | None = None
    for i in range(repeat):
        with server_process(LATENCY) as url:
            wall = score(url, fresh_copy(prepared, tmp / f"{name}-{i}" / "m.db"), concurrency, *args)
            stats = server_stats(url)
        if best is None or wall < best["wall"]:
            best = {"wall": wall, "calls": stats["requests"], "max_in_flight": stats["max_in_flight"]}
    return best


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        prepared = tmp / "prepared.db"
        await prepare(prepared)
        one = measure(prepared, tmp, "one", args.concurrency, (), args.repeat)
        panel = measure(prepared, tmp, "panel", args.concurrency, ("--judges", "judge-a,judge-b,judge-c"),
                        args.repeat)
    print(f"score --mode dump_all, {int(LATENCY * 1000)} ms server, --concurrency {args.concurrency}, CLI process:")
    for name, m in (("one judge", one), ("panel of 3", panel)):
        print(f"  {name:10}: {m['calls']:5d} calls, {m['wall']:6.2f} s (server saw {m['max_in_flight']} in flight)")
    print(f"  panel / one judge: {panel['calls'] / one['calls']:.2f}x calls, {panel['wall'] / one['wall']:.2f}x "
          "wall time")


if __name__ == "__main__":
    anyio.run(main)
