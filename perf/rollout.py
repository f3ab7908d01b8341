"""Benchmark for the rollout runner (issues 5 and 12), over real loopback HTTP.

    .venv/bin/python perf/rollout.py

Against the loopback fake in its own process with 50 ms latency per call: 3 users x 31 tasks x 2
systems (nomem, longctx_full with a fast stand-in encoder: the sentence encoder is not what this
measures, which is also why the rollout runs in this process and not as a CLI one), every episode
ending on its second turn. Prints calls, wall time, the sequential time it replaces and the speed
relative to the critical path (users and systems in parallel, each user's turns in sequence: the
longest per-(system, user) chain of calls x 50 ms; target >= 80%), and the per-episode harness
overhead (snapshot, dump and the episode's store transaction; target <= 20 ms).
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.bench.instances import resolve_bench  # noqa: E402
from memaudit.config import load_settings  # noqa: E402
from memaudit.llm.embed import Embedder  # noqa: E402
from memaudit.rollout import runner  # noqa: E402
from memaudit.runtime import open_runtime  # noqa: E402
from perf.loopback import server_process, server_stats  # noqa: E402
from perf.sample_run import TASKS, USERS, fast_encoder  # noqa: E402

LATENCY = 0.05
SYSTEMS = ["nomem", "longctx_full"]


async def main() -> None:
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
    with tempfile.TemporaryDirectory() as tmp, server_process(LATENCY, "perf.sample_run:fake_model") as url:
        settings = replace(load_settings(db=Path(tmp) / "bench.db", base_url=url, model="fake",
                                         backend="openai", env={}), concurrency=64)
        async with open_runtime(settings) as rt:
            rt.embedder = Embedder(rt.store.vectors, encoder=fast_encoder)
            bench = await resolve_bench(rt.store, "sample")
            users = [u.id for u in bench.users[:USERS]]
            start = time.perf_counter()
            await runner.run_rollout(rt, bench, SYSTEMS, users=users, tasks=TASKS, progress=False)
            wall = time.perf_counter() - start
            episodes = await rt.store.episodes.count()
        calls = server_stats(url)["requests"]

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
