"""Benchmark: are a memory system's write and search latencies reproducible enough to compare (issue 44)?

    .venv/bin/python perf/latency.py [--system mem0ai] [--runs 2] [--users 3] [--tasks 5] [--one-after-another]

As a user would, through CLI processes against the loopback fake (`memaudit serve --fake`'s model):
the same rollout of one system (`--time-alone`: one user at a time, nothing else of the rollout on
the cores), `--runs` times, each into a fresh store so that no call cache answers anything. The
runs take turns a shard at a time (`--shard I/N`, N = the users: each run's users in the same
order, every shard of a run into its store), so that a machine whose other load drifts meanwhile (a
shared machine) weighs on every run alike; `--one-after-another` runs each whole before the next. Printed per run, from `tables --only
footprint --format json`: write s/episode p50 and p95 with the episodes they are over, search p50
with its reads, and the start-up (each process's first operation per user, apart); then the spread
of the write p50s (issue 44's acceptance: the two within 25 % of each other) and the machine's load
average over the benchmark."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memaudit.testing.http_server import scripted_fake, serve  # noqa: E402


def memaudit(*args: str) -> str:
    done = subprocess.run([sys.executable, str(REPO / "memaudit.py"), *args], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"memaudit {args[0]} failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def rollout(db: Path, url: str, args, shard: str | None) -> None:
    """The run's rollout, or one shard of it (`I/N`) into the same store."""
    memaudit("rollout", "--bench", "sample", "--systems", args.system, "--users", str(args.users), "--tasks",
             str(args.tasks), "--max-turns", "3", "--time-alone", "--quiet", "--db", str(db), "--base-url", url,
             "--model", "fake", *(["--shard", shard] if shard else []))


def footprint(db: Path) -> dict:
    return orjson.loads(memaudit("tables", "--only", "footprint", "--format", "json", "--bootstrap", "0",
                                 "--db", str(db)))["footprint"][0]


def seconds(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="mem0ai")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--one-after-another", action="store_true", help="each run whole before the next")
    args = parser.parse_args()
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp, serve(scripted_fake()) as url:
        stores = [Path(tmp) / f"run{n}.db" for n in range(args.runs)]
        steps = [(db, None) for db in stores] if args.one_after_another else \
            [(db, f"{i}/{args.users}") for i in range(1, args.users + 1) for db in stores]
        for db, shard in steps:
            rollout(db, url, args, shard)
            loads.append(os.getloadavg()[0])
        rows = [footprint(db) for db in stores]
    order = "one after another" if args.one_after_another else "taking turns a shard at a time"
    print(f"{args.system}: {args.runs} identical rollouts (--time-alone, {args.users} users x {args.tasks} tasks, "
          f"--max-turns 3, fresh stores, {order}), the fake model on loopback; load average "
          f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    print("| run | timed | write p50 | write p95 | episodes | search p50 | reads | start-up p50/max "
          "| starts |\n|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for n, r in enumerate(rows, 1):
        cells = [n, r["timed"], seconds(r["write_p50"]), seconds(r["write_p95"]), r["writes_timed"],
                 seconds(r["search_p50"]), r["searches_timed"],
                 f"{seconds(r['startup_p50'])}/{seconds(r['startup_max'])}", r["startups_timed"]]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    p50s = [r["write_p50"] for r in rows if r["write_p50"]]
    if len(p50s) >= 2:
        spread = (max(p50s) - min(p50s)) / min(p50s)
        verdict = "within" if spread <= 0.25 else "beyond"
        print(f"write p50 spread: {spread * 100:.1f} % of the smaller ({verdict} 25 %)")


if __name__ == "__main__":
    main()
