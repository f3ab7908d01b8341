"""Benchmark (issue 40, item 4): each deployed library at study scale, on the path users run (a
`memaudit rollout` process, the library's calls over loopback HTTP through the recording proxy, a
library in its own environment in worker processes) against the zero-latency loopback fake.

    .venv/bin/python perf/library_scale.py [--libraries cognee,mem0ai] [--users 50] [--tasks 1]
        [--max-turns 1] [--library-workers 4] [--time-alone] [--latency 2.0] [--concurrency 32]

Run it twice: at 50 users at once for the memory (the default), and with a few users and tasks
`--time-alone` for the wall time of a library's own work a message (at once, 50 users share the
cores, and a message's wall time is mostly waiting for the others').

Per library (every deployed library the registry lists, unless --libraries names some) it runs
USERS users x TASKS tasks and prints:
- the wall time per user message of the library's own work: the rollout's timed writes (the
  `memory_ops` table: each `observe` of a user message, around the adapter call) over the
  messages written (the median: a user's first write also opens its library), on a fake that
  answers at once (model time excluded: what is left is the library, the proxy and memaudit's
  client), and their CPU seconds (memaudit's process tree, beyond a nomem rollout's of that size);
- the peak resident memory of memaudit and its workers (the process tree, sampled every 0.2 s),
  and of the largest single process;
- the store: memory items and their bytes per user at the end, and the store file's size;
- the projected wall time of the published study (50 users x 31 tasks, --study-messages user
  messages a task) at a model latency of --latency s a call and --concurrency calls in flight:
  the longest of (a) each user's own path (its messages, each the library's model calls at that
  latency plus its measured work, and the dialogue's own calls: assistant, judge and simulator a
  turn) in rounds of the users that run at once (all, or --library-workers for a library in its
  own environment), (b) every call queued behind the concurrency, (c) the libraries' measured
  CPU seconds spread over this machine's cores.
A study subset (fewer users or tasks than 50 x 31) is stated on each line; the projection
scales its per-message figures, measured at this subset's store sizes."""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memaudit.testing.release_fixture import write_release  # noqa: E402
from perf.loopback import server_process  # noqa: E402

STUDY_USERS, STUDY_TASKS = 50, 31
DIALOGUE_CALLS_PER_TURN = 3  # the assistant's reply, the preference judge, the simulated user
WRITES = ("task_start", "user")  # the user messages a library is given (the published study's)
SIMULATOR_TEXT = "I run along the river most mornings and my left knee aches after long hills. " * 4


def library_fake():
    """The fake the loopback server answers with: every library's memory calls as its contract's
    fake answers them, and a simulated user who always follows up (so every turn is played)."""
    from memaudit.testing.adapter_contract import import_every_adapter, script
    from memaudit.testing.fake_openai import FakeOpenAI

    import_every_adapter()  # the libraries run in the rollout's process: the fake consults their adapters here
    return script(FakeOpenAI()).on("simulator", lambda body: {"feedback_type": "followup", "text": SIMULATOR_TEXT})


def deployed_libraries() -> list[str]:
    """Every built-in system over a deployed library that loads here (`memaudit systems`)."""
    from memaudit.adapters.registry import get_adapter

    done = subprocess.run([sys.executable, str(REPO / "memaudit.py"), "systems", "--json"], capture_output=True,
                          text=True, cwd=REPO, check=True)
    loads = [row["name"] for row in json.loads(done.stdout) if row["loads"] and row["origin"] == "built-in"]
    return [name for name in loads if get_adapter(name).library is not None]


class TreeSampler:
    """Peak resident memory of a process and its descendants, and their CPU seconds."""

    def __init__(self, pid: int):
        self.pid, self.peak, self.peak_one, self.cpu = pid, 0, 0, {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def tree(self) -> list[int]:
        parents = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
        found, frontier = [self.pid], [self.pid]
        while frontier:
            frontier = [pid for pid, parent in parents.items() if parent in frontier]
            found += frontier
        return found

    def run(self) -> None:
        page, ticks = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")
        while not self.stop.wait(0.2):
            total = 0
            for pid in self.tree():
                try:
                    rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except (OSError, IndexError):
                    continue
                total += rss
                self.peak_one = max(self.peak_one, rss)
                self.cpu[pid] = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
            self.peak = max(self.peak, total)

    def close(self) -> float:
        """The CPU seconds of the tree (each process's last sample)."""
        self.stop.set()
        self.thread.join()
        return sum(self.cpu.values())


def measure(system: str, url: str, scratch: Path, args) -> dict:
    db = scratch / f"{system}.db"
    command = [sys.executable, str(REPO / "memaudit.py"), "--db", str(db), "--base-url", url, "--model", "fake",
               "rollout", "--bench", str(scratch / "bench"), "--systems", system, "--users", str(args.users), "--tasks",
               str(args.tasks), "--max-turns", str(args.max_turns), "--library-workers", str(args.library_workers),
               "--quiet", *(["--time-alone"] if args.time_alone else [])]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=scratch, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(process.pid)
    _, errors = process.communicate()
    wall, cpu = time.perf_counter() - start, sampler.close()
    if process.returncode != 0:
        raise SystemExit(f"{system}: rollout failed: {errors.strip().splitlines()[-1] if errors.strip() else '?'}")
    with sqlite3.connect(db) as con:
        marks = ",".join("?" * len(WRITES))
        writes = con.execute(f"SELECT seconds, calls FROM memory_ops WHERE op IN ({marks})", WRITES).fetchall()
        searches = [seconds for seconds, in con.execute("SELECT seconds FROM memory_ops WHERE op = 'search'")]
        last = con.execute("SELECT n_items, LENGTH(items) FROM snapshots s WHERE task_idx = "
                           "(SELECT MAX(task_idx) FROM snapshots t WHERE t.user_id = s.user_id)").fetchall()
    users = max(len(last), 1)
    # Medians: a user's first write or search also opens its library (imports, a worker's start).
    return {"system": system, "wall": wall, "cpu": cpu, "peak": sampler.peak, "peak_one": sampler.peak_one,
            "writes": len(writes), "per_write": median([seconds for seconds, _ in writes]),
            "calls_per_write": sum(calls for _, calls in writes) / max(len(writes), 1),
            "per_search": median(searches), "items": sum(n for n, _ in last) / users,
            "item_bytes": sum(b for _, b in last) / users, "db_bytes": db.stat().st_size,
            "own_environment": own_environment(system)}


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def own_environment(system: str) -> bool:
    from memaudit.adapters.registry import get_adapter

    return getattr(get_adapter(system), "ENVIRONMENT", None) is not None


def projection(m: dict, args) -> float:
    """Seconds the published study would take (see the module's docstring)."""
    messages = STUDY_USERS * STUDY_TASKS * args.study_messages
    per_write, per_search = m["per_write"], m["per_search"]
    turns_per_task = max(args.study_messages - 1, 1)
    user_path = STUDY_TASKS * (args.study_messages * (per_write + m["calls_per_write"] * args.latency)
                               + turns_per_task * (per_search + DIALOGUE_CALLS_PER_TURN * args.latency))
    at_once = min(args.library_workers, STUDY_USERS) if m["own_environment"] else STUDY_USERS
    rounds = -(-STUDY_USERS // at_once)
    calls = messages * m["calls_per_write"] + STUDY_USERS * STUDY_TASKS * turns_per_task * DIALOGUE_CALLS_PER_TURN
    cpu = m["cpu_per_write"] * messages / (os.cpu_count() or 1)
    return max(rounds * user_path, calls * args.latency / args.concurrency, cpu)


def report(m: dict, args) -> str:
    subset = f"{args.users} users x {args.tasks} tasks x {args.max_turns} turns" + \
        (" one at a time" if args.time_alone else " at once")
    hours = projection(m, args) / 3600
    return (f"{m['system']:<11} {subset}: {m['writes']} messages, {m['per_write']:.2f} s wall a message (median; "
            f"{m['cpu_per_write']:.2f} CPU s a message beyond nomem's, {m['calls_per_write']:.1f} model calls), "
            f"search {m['per_search']:.2f} s; "
            f"peak RSS {m['peak'] / 2**30:.2f} GiB (largest process {m['peak_one'] / 2**30:.2f} GiB); "
            f"store {m['items']:.0f} items / {m['item_bytes'] / 1024:.0f} KiB a user, file {m['db_bytes'] / 2**20:.1f} MiB; "
            f"rollout {m['wall']:.0f} s; published study projected {hours:.1f} h at {args.latency:g} s a call, "
            f"{args.concurrency} in flight")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--libraries", default=None, help="comma-separated (default: every deployed library)")
    parser.add_argument("--users", type=int, default=STUDY_USERS)
    parser.add_argument("--tasks", type=int, default=1, help="tasks a user (the study's: 31)")
    parser.add_argument("--max-turns", type=int, default=1)
    parser.add_argument("--library-workers", type=int, default=4)
    parser.add_argument("--time-alone", action="store_true",
                        help="one user at a time (rollout --time-alone): the wall times of the library alone, not "
                             "shared with the other users' (the figures at 50 users at once are the memory's)")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds a model call takes, for the projection")
    parser.add_argument("--concurrency", type=int, default=32, help="model calls in flight, for the projection")
    parser.add_argument("--study-messages", type=int, default=4,
                        help="user messages a task in the published study (the task and its replies), for the projection")
    args = parser.parse_args()
    libraries = args.libraries.split(",") if args.libraries else deployed_libraries()
    with tempfile.TemporaryDirectory(prefix="memaudit-perf-scale-") as scratch, \
            server_process(0.0, "perf.library_scale:library_fake") as url:
        # The study's shape: 50 synthetic users, 31 tasks each (memaudit/testing/release_fixture.py).
        write_release(Path(scratch) / "bench", users=max(args.users, 1))
        # memaudit's own share of the CPU (start-up, the dialogue, the store): the same rollout without memory.
        baseline = measure("nomem", url, Path(scratch), args)
        print(f"nomem       baseline: {baseline['cpu']:.0f} CPU s, peak RSS {baseline['peak'] / 2**30:.2f} GiB, "
              f"rollout {baseline['wall']:.0f} s", flush=True)
        for system in libraries:
            m = measure(system, url, Path(scratch), args)
            m["cpu_per_write"] = max(m["cpu"] - baseline["cpu"], 0.0) / max(m["writes"], 1)
            print(report(m, args), flush=True)


if __name__ == "__main__":
    main()
