"""What a memory system costs at rollout (issue 32): every write and read of the assistant's memory
is timed on the machine that runs it, with the model calls it made; the footprint table reports
p50/p95 wall times over what no call cache answered, memory-side calls and tokens per user, and
the writes lost — in md, json and the HTML report, from one declaration. Replay neither reproduces
nor compares the wall times."""
from __future__ import annotations

import orjson
import pytest

from memaudit.report.columns import declared
from memaudit.rollout.runner import run_rollout
from memaudit.tables.columns import FOOTPRINT, measured_keys
from memaudit.tables.paper import compute_tables
from memaudit.tables.paper_render import render
from memaudit.types import Episode, MemoryOp

pytestmark = pytest.mark.anyio
COST = ("write_p50", "write_p95", "search_p50", "search_p95", "memory_calls", "memory_tokens",
        "memory_write_failures")


async def test_a_rollout_times_every_write_and_read_and_footprint_reports_them(open_rt, fake, bench):
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["amem", "nomem"], max_turns=2, progress=False)
        ops = await rt.store.fetchall("SELECT * FROM memory_ops WHERE run='amem' ORDER BY user_id, task_idx, seq")
        kinds = {r["op"] for r in ops}
        assert kinds == {"task_start", "assistant", "user", "episode_end", "search"}
        assert all(r["seconds"] >= 0 for r in ops) and sum(r["calls"] for r in ops) > 0
        # every episode's first operation is the assistant's read of the task, then the task is written
        first = [r["op"] for r in ops if r["seq"] < 2]
        assert first[:2] == ["search", "task_start"]
        tables = await compute_tables(rt.store, bootstrap=0)
    rows = {row["run"]: row for row in tables["footprint"]}
    amem, nomem = rows["amem"], rows["nomem"]
    assert amem["write_p50"] > 0 and amem["write_p95"] >= amem["write_p50"]
    assert amem["search_p95"] >= amem["search_p50"] >= 0
    assert amem["memory_calls"] > 0 and amem["memory_tokens"] > 0 and amem["memory_write_failures"] == 0
    assert nomem["memory_calls"] == 0 and nomem["memory_tokens"] == 0
    assert ("| write s/episode p50/p95 | episodes timed | search s p50/p95 | reads timed | start-up s p50/max | timed "
            "| memory calls/user |") in render(tables, "md")
    # every latency with its sample count, the start-up apart: each system's first read paid it
    assert amem["writes_timed"] > 0 and amem["searches_timed"] > 0 and amem["startups_timed"] == 2
    assert amem["timed"] == "with others"
    assert set(COST) <= set(orjson.loads(render(tables, "json"))["footprint"][0])
    assert "memory calls/user" in declared(FOOTPRINT, tables["footprint"])  # the HTML report's table
    assert measured_keys(FOOTPRINT) == {"write_p50", "write_p95", "search_p50", "search_p95", "writes_timed",
                                        "searches_timed", "startup_p50", "startup_max", "startups_timed", "timed"}


async def test_operations_a_cache_answered_are_not_timings_of_the_system(open_rt, bench):
    async with open_rt() as rt:
        episode = Episode("r", "user_001", 1, "task", [], "max_turns")
        live = [MemoryOp("task_start", 2.0, 1, 0), MemoryOp("search", 0.5, 0, 0), MemoryOp("user", 1.0, 0, 0)]
        cached = [MemoryOp("task_start", 0.01, 1, 1), MemoryOp("search", 0.001, 1, 1)]
        await rt.store.write(rt.store.episodes.op_statements(episode, live)
                             + rt.store.episodes.op_statements(Episode("r", "user_001", 2, "t", [], "max_turns"),
                                                               cached))
        seconds = await rt.store.episodes.live_op_seconds("r")
    assert seconds["writes"] == [3.0] and seconds["reads"] == [0.5]  # episode 2 was answered from the cache


async def test_time_alone_runs_one_system_and_user_at_a_time_and_the_footprint_says_so(open_rt, fake, bench):
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["amem", "bm25"], max_turns=2, progress=False, time_alone=True)
        await run_rollout(rt, bench, ["simple_rag"], max_turns=2, progress=False)
        order = await rt.store.fetchall("SELECT run, user_id FROM memory_ops WHERE startup = 1 ORDER BY rowid")
        tables = await compute_tables(rt.store, bootstrap=0)
    # system after system, a user's first operation (its start-up) only once the one before is done
    assert [(r["run"], r["user_id"]) for r in order][:4] == [("amem", "user_001"), ("amem", "user_002"),
                                                             ("bm25", "user_001"), ("bm25", "user_002")]
    timed = {row["run"]: row["timed"] for row in tables["footprint"]}
    assert timed == {"amem": "alone", "bm25": "alone", "simple_rag": "with others"}
