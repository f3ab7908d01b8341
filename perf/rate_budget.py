"""Benchmark: one rate budget for all shards (issue 34). N `memaudit rollout --shard i/N --rpm R`
processes run at once against one loopback fake, as N array tasks of a cluster would against one
provider; the fake notes the time each request arrives. Printed: the most requests the fake saw in
any 60-second window (never more than R), the requests in all and the run's length.

    .venv/bin/python perf/rate_budget.py [--rpm 600] [--shards 3] [--tasks 20]

The study: the bundled sample's users with nomem and bm25 (memory systems that call no model and
embed nothing, so each request is the dialogue's own), two assistant replies per episode. Each
shard paces at R/N; the shards hold different numbers of (system, user) cells, so the study's pace
is R while every shard has work and falls as shards finish. The windows counted start at every
arrival, each [t, t + 60 s)."""
from __future__ import annotations

import argparse
import bisect
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memaudit.testing.http_server import serve  # noqa: E402
from perf.sample_run import fake_model  # noqa: E402

SYSTEMS = "nomem,bm25"


def clocked(fake):
    """The fake, noting the arrival time of every request it answers."""
    arrivals: list[float] = []
    lock = threading.Lock()
    answer = fake.reply_http

    def reply_http(method, path, headers, content):
        with lock:
            arrivals.append(time.monotonic())
        return answer(method, path, headers, content)

    fake.reply_http = reply_http
    return fake, arrivals


def most_in_a_minute(arrivals: list[float]) -> int:
    times = sorted(arrivals)
    return max((bisect.bisect_left(times, t + 60.0) - i for i, t in enumerate(times)), default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=float, default=600)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=20)
    args = parser.parse_args()
    fake, arrivals = clocked(fake_model())
    with tempfile.TemporaryDirectory() as tmp, serve(fake) as url:
        commands = [[sys.executable, str(REPO / "memaudit.py"), "rollout", "--bench", "sample", "--systems", SYSTEMS,
                     "--tasks", str(args.tasks), "--max-turns", "2", "--quiet", "--base-url", url, "--model", "fake",
                     "--db", str(Path(tmp) / f"shard-{i}.db"), "--shard", f"{i}/{args.shards}", "--rpm", str(args.rpm)]
                    for i in range(1, args.shards + 1)]
        start = time.monotonic()
        workers = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for c in commands]
        failed = [w.communicate()[1].strip().splitlines()[-1:] for w in workers if w.wait() != 0]
        took = time.monotonic() - start
    if failed:
        sys.exit(f"a shard failed: {failed}")
    most = most_in_a_minute(arrivals)
    print(f"{args.shards} shards, --rpm {args.rpm:g}: {len(arrivals)} requests in {took:.0f} s; "
          f"the most the fake saw in any minute: {most} ({'within' if most <= args.rpm else 'OVER'} the budget)")
    if most > args.rpm:
        sys.exit(1)


if __name__ == "__main__":
    main()
