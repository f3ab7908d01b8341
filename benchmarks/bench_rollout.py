"""Benchmark for the rollout runner (issue 5).

    .venv/bin/python benchmarks/bench_rollout.py

Against a fake endpoint with 50 ms latency per call: 3 users x 31 tasks x 2 systems (nomem,
longctx_full with a fast fake encoder), every episode ending on its second turn. Prints calls,
wall time, the sequential time it replaces and the speed relative to the ideal parallel time
(= the longest per-(system, user) chain of calls x 50 ms; target >= 80%), and the per-episode
harness overhead (snapshot, dump and the episode's store transaction; target <= 20 ms).
"""
from __future__ import annotations

import hashlib
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.bench.instances import resolve_bench  # noqa: E402
from memaudit.config import load_settings  # noqa: E402
from memaudit.embed import DIM, Embedder  # noqa: E402
from memaudit.rollout import runner  # noqa: E402
from memaudit.runtime import open_runtime  # noqa: E402
from memaudit.testing.fake_openai import FakeOpenAI  # noqa: E402

LATENCY = 0.05
USERS, TASKS = 3, 31
SYSTEMS = ["nomem", "longctx_full"]


def fast_encoder(texts: list[str]) -> np.ndarray:
    rows = []
    for text in texts:
        v = np.frombuffer(hashlib.sha256(text.encode()).digest() * (DIM * 4 // 32), dtype=np.uint8)[:DIM]
        v = v.astype(np.float32) - 127.5
        rows.append(v / np.linalg.norm(v))
    return np.stack(rows)


def second_turn_satisfies(body: dict) -> dict:
    """The simulated user is satisfied once the conversation holds two assistant replies."""
    conversation = body["messages"][-1]["content"]
    done = conversation.count("Assistant: ") >= 2
    return {"feedback_type": "satisfied" if done else "followup", "text": "ok" if done else "more detail please"}


async def main() -> None:
    fake = FakeOpenAI(latency=LATENCY).on("simulator", second_turn_satisfies)
    fake.on_text(lambda body: f"A plan written after reading {len(body['messages'])} messages.")
    chains: dict[tuple[str, str], int] = defaultdict(int)
    build: list[float] = []    # snapshot + dump + statements
    overhead: list[float] = []  # build + the episode's transaction (incl. waiting for the one writer)
    real_commit, real_record = runner.commit_episode, runner.episode_record

    def timed_record(store, ep, adapter, uses):
        start = time.perf_counter()
        statements = real_record(store, ep, adapter, uses)
        build.append(time.perf_counter() - start)
        return statements

    async def timed_commit(store, ep, adapter, uses):
        start = time.perf_counter()
        await real_commit(store, ep, adapter, uses)
        overhead.append(time.perf_counter() - start)
        chains[(ep.run, ep.user_id)] += len(uses)

    runner.commit_episode, runner.episode_record = timed_commit, timed_record
    with tempfile.TemporaryDirectory() as tmp:
        settings = replace(load_settings(db=Path(tmp) / "bench.db", base_url="http://fake.test/v1", model="fake",
                                         backend="openai", env={}), concurrency=64)
        async with open_runtime(settings, transport=fake.transport()) as rt:
            rt.embedder = Embedder(rt.store, encoder=fast_encoder)
            bench = await resolve_bench(rt.store, "sample")
            users = [u.id for u in bench.users[:USERS]]
            start = time.perf_counter()
            await runner.run_rollout(rt, bench, SYSTEMS, users=users, tasks=TASKS, progress=False)
            wall = time.perf_counter() - start
            episodes = await rt.store.episodes.count()

    calls = len(fake.requests)
    longest = max(chains.values())
    ideal = longest * LATENCY
    print(f"benchmark: bundled sample; {len(users)} users x {TASKS} tasks x {len(SYSTEMS)} systems = {episodes} episodes")
    print(f"model calls sent: {calls} ({sum(chains.values())} uses incl. cache/single-flight hits)")
    print(f"wall time: {wall:.2f} s; sequential time it replaces: {calls * LATENCY:.1f} s "
          f"({calls * LATENCY / wall:.1f}x)")
    print(f"ideal parallel time: longest chain {longest} calls x {LATENCY * 1000:.0f} ms = {ideal:.2f} s; "
          f"speed = {ideal / wall:.0%} of ideal (target >= 80%)")
    print(f"per-episode harness overhead (snapshot + dump + store transaction): {describe(overhead)} "
          f"(target <= 20 ms)")
    print(f"  of which building the rows (snapshot, dump, statements): {describe(build)}")


def describe(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return (f"mean {statistics.mean(ordered) * 1000:.2f} ms, p95 {ordered[int(0.95 * len(ordered))] * 1000:.2f} ms, "
            f"max {ordered[-1] * 1000:.2f} ms")


if __name__ == "__main__":
    anyio.run(main)
