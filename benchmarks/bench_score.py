"""Benchmark for recovery scoring (issue 6).

    .venv/bin/python benchmarks/bench_score.py

Scores 3 users x 31 targets (dump_all: one slot fill and one judge call each) against a fake
endpoint that takes 100 ms per call, once at concurrency 64 and once one call at a time, and
prints both wall times and the speed-up (target >= 15x).
"""
from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.config import load_settings  # noqa: E402
from memaudit.runtime import open_runtime  # noqa: E402
from memaudit.scoring.recovery import score_runs  # noqa: E402
from memaudit.store import Store  # noqa: E402
from memaudit.types import BANK_COUNTS, DEFAULT_VARIANT, BankEntry, Benchmark, Episode, Task, User  # noqa: E402
from memaudit.testing.fake_openai import FakeOpenAI  # noqa: E402

USERS = 3
LATENCY = 0.1
TARGET = 15.0


def benchmark() -> Benchmark:
    users, tasks = [], {}
    for u in range(1, USERS + 1):
        uid = f"user_{u:03d}"
        bank = tuple(BankEntry(cat, f"{cat}_{i}", f"stance {i} of {uid}", f"Why {uid} holds stance {i}.")
                     for cat, count in BANK_COUNTS.items() for i in range(count))
        users.append(User(uid, {}, bank))
        tasks[uid] = tuple(Task(uid, i, f"help with chore {i}", e.category, e.dimension, e.short)
                           for i, e in enumerate(bank, start=1))
    return Benchmark("bench_score", tuple(users), tasks)


async def seed_run(store: Store, bench: Benchmark) -> None:
    """A finished run: one episode per task and a 40-item final store per user (read by dump_all)."""
    await store.save_benchmark(bench)
    await store.ensure_run("nomem", "nomem", bench.name)
    statements = []
    for user in bench.users:
        for task in bench.tasks[user.id]:
            statements += store.episodes.statements(Episode("nomem", user.id, task.index, task.text, [], "satisfied"),
                                                    None)
        items = [{"id": f"{user.id}-{i}", "content": f"User: a remark about topic {i} of {user.id}"} for i in range(40)]
        statements.append(store.episodes.snapshot_statement("nomem", user.id, len(bench.tasks[user.id]), {}, items))
    await store.write(statements)


async def timed(concurrency: int, db: Path) -> tuple[float, int]:
    settings = replace(load_settings(db=db, base_url="http://fake.test/v1", model="fake", backend="openai",
                                     concurrency=concurrency, cache="off", env={}), backoff_base=0.001)
    fake = FakeOpenAI(latency=LATENCY)
    async with open_runtime(settings, transport=fake.transport()) as rt:
        await seed_run(rt.store, benchmark())
        start = time.perf_counter()
        await score_runs(rt, ["nomem"], ["dump_all"])
        took = time.perf_counter() - start
        ok = sum(r["ok"] for r in await rt.store.scores.summary("nomem", DEFAULT_VARIANT))
    assert ok == USERS * 31, ok
    return took, len(fake.requests)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        parallel, calls = await timed(64, Path(tmp) / "parallel.db")
        serial, _ = await timed(1, Path(tmp) / "serial.db")
    speedup = serial / parallel
    print(f"scoring {USERS} users x 31 targets = {calls} calls against a {LATENCY * 1000:.0f} ms fake")
    print(f"  concurrency 64:   {parallel:6.2f} s")
    print(f"  one at a time:    {serial:6.2f} s")
    print(f"  speed-up:         {speedup:6.1f}x (target >= {TARGET:.0f}x) {'PASS' if speedup >= TARGET else 'FAIL'}")


if __name__ == "__main__":
    anyio.run(main)
