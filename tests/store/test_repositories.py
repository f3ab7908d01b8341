"""The store's repositories: typed configs round-trip, statements shared by stages and the
release importer, run selection, and the schema known only inside memaudit/store/."""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import anyio
import pytest

from memaudit.errors import BadInput
from memaudit.store import PassConfig, Rescore, RunConfig, open_store, select_runs
from memaudit.types import (DEFAULT_VARIANT, Attribution, BankEntry, Benchmark, Episode, Reconstruction, Task, Turn,
                            User, footprint)

ROOT = Path(__file__).resolve().parents[2]
SQL = re.compile(r"\b(SELECT\s+[\w*(]|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|REPLACE\s+INTO)")


def run(fn):
    return anyio.run(fn)


def bench() -> Benchmark:
    users = tuple(User(f"u{i}", {"name": f"U{i}"}, (BankEntry("skill_memory", "tools", "vim", "uses vim"),
                                                     BankEntry("self_model", "mood", "calm", "is calm")))
                  for i in (1, 2))
    tasks = {u.id: (Task(u.id, 1, "pick an editor", "skill_memory", "tools", "vim"),) for u in users}
    return Benchmark("b", users, tasks)


def recon(run_id: str, user: str, dimension: str, score: float, variant: str = DEFAULT_VARIANT) -> Reconstruction:
    return Reconstruction(run_id, "dump_all", 0, variant, user, "skill_memory", dimension, "expl", "truth",
                          {"n_items": 1, "chars": 3}, "label", "reason", score, "judge", "ok")


def test_no_sql_outside_the_store():
    # The library and the adapters. Performance scripts (perf/) may count a finished store's rows
    # directly: they measure the file, they do not run the pipeline.
    found = []
    for path in [*(ROOT / "memaudit").rglob("*.py"), *(ROOT / "adapters").rglob("*.py")]:
        if "store" in path.relative_to(ROOT).parts[:2]:
            continue
        found += [f"{path.relative_to(ROOT)}:{i}" for i, line in enumerate(path.read_text().splitlines(), 1)
                  if SQL.search(line)]
    # An adapter may speak SQL to its upstream library's own database (mem0ai's table of session
    # messages, Letta's Postgres schema), never to memaudit's: each such line says so.
    upstream = {f"adapters/{path.name}:{i}" for path in (ROOT / "adapters").glob("*.py")
                for i, line in enumerate(path.read_text().splitlines(), 1) if line.endswith("# upstream schema")}
    assert [f for f in found if f not in upstream] == []


def test_run_config_round_trips_and_reads_old_rows():
    config = RunConfig(["u1"], 2, 3, 4, "t")
    assert RunConfig.from_json(config.to_json()) == config
    assert "imported_from" not in config.to_json()  # rollout rows keep their recorded shape
    assert RunConfig.from_json({}) == RunConfig()
    assert RunConfig.from_json({"tasks": None, "unknown": 1}) == RunConfig()


def test_pass_config_keeps_scorer_fields():
    stored = {"context_window": None, "window": 8192, "dims": "targeted", "rescore": None,
              "reader_model": "m", "judge_model": "j", "reader_prompt": "a", "judge_prompt": "b"}
    config = PassConfig.from_json(stored)
    assert config.dims == "targeted" and config.window == 8192
    assert config.to_json() == stored
    change = {"from": "default", "judge_model": "j2", "judge_prompt": "/p/judge.md", "reader_model": None}
    rescored = PassConfig.from_json({**stored, "rescore": change})
    assert rescored.rescore == Rescore("j2", "/p/judge.md", None) and rescored.to_json()["rescore"] == change


def test_runs_episodes_and_scores_round_trip(tmp_path):
    async def main():
        async with open_store(tmp_path / "s.db") as store:
            await store.benchmarks.save(bench())
            assert (await store.benchmarks.load("b")) == bench()
            assert await store.benchmarks.most_tasks("b") == 1
            assert await store.benchmarks.user_ids("b") == ["u1", "u2"]
            assert (await store.benchmarks.user_row("b", "u2"))["user_id"] == "u2"
            await store.runs.ensure("r", "nomem", "b", config=RunConfig(["u1"], 1).to_json())
            typed = await store.runs.require("r")
            assert typed.config == RunConfig(["u1"], 1) and typed.origin == "rollout"
            ep = Episode("r", "u1", 1, "pick an editor", [Turn(1, "hi", "satisfied", "ok", 4.0)], "satisfied")
            items = [{"id": "a", "content": "abcd"}, {"id": "b", "content": "ef"}]
            await store.write([*store.episodes.statements(ep, 4.0),
                               store.episodes.snapshot_statement("r", "u1", 1, {"s": 1}, items),
                               *store.calls.use_statements("r", "episode:u1:1", [("agent", "k1", False)])])
            assert await store.episodes.load("r") == [ep]
            assert await store.episodes.done("r", "u1") == {1}
            assert await store.episodes.last_footprints("r") == {"u1": footprint(items)} == {"u1": (2, 3.0)}
            assert (await store.episodes.outcomes("r"))["satisfied"] == 1
            await store.scores.record_pass("r", "dump_all", 0, DEFAULT_VARIANT, PassConfig(None, 100, "all"))
            await store.write([store.scores.reconstruction_statement(recon("r", "u1", "tools", 0.5))])
            [p] = await store.scores.passes("r")
            assert p.config == PassConfig(None, 100, "all") and await store.scores.scored_runs() == ["r"]
            assert await store.scores.load("r") == [recon("r", "u1", "tools", 0.5)]
            assert await store.scores.keys("r", DEFAULT_VARIANT) == {("dump_all", 0, "u1", "tools")}
    run(main)


def test_import_statements_refuse_a_second_row_for_one_key(tmp_path):
    """The importer uses the stages' statements with replace=False: damage raises, never overwrites."""
    async def main():
        async with open_store(tmp_path / "s.db") as store:
            row = recon("r", "u1", "tools", 0.5)
            await store.write([store.scores.reconstruction_statement(row, replace=False)])
            with pytest.raises(sqlite3.IntegrityError):
                await store.write([store.scores.reconstruction_statement(row, replace=False)])
            attribution = Attribution("r", "dump_all", 0, DEFAULT_VARIANT, "u1", "skill_memory", "tools",
                                      "memory_failure", 0.5, [], 1)
            await store.write([store.attributions.statement(attribution)] * 2)  # the stages' own: replaced
            assert await store.attributions.load("r") == [attribution]
            await store.write([store.attributions.oracle_statement("b", "u1", "tools", "h", True, "first"),
                               store.attributions.oracle_statement("b", "u1", "tools", "h", False, "second")])
            assert await store.attributions.oracle("b", "u1", "tools", "h") == {"can_invite": True, "reason": "first"}
            await store.write([store.attributions.oracle_statement("b", "u1", "tools", "h", None, "x", replace=True)])
            assert await store.attributions.oracle("b", "u1", "tools", "h") == {"can_invite": None, "reason": "x"}
    run(main)


def test_select_runs_is_the_one_run_choice(tmp_path):
    async def main():
        async with open_store(tmp_path / "s.db") as store:
            await store.benchmarks.save(bench())
            for name, origin in (("b_run", "rollout"), ("a_run", "import"), ("c_run", "rollout")):
                await store.runs.ensure(name, "nomem", "b", origin=origin)
            assert [r.run for r in await select_runs(store, None)] == ["a_run", "b_run", "c_run"]
            assert [r.run for r in await select_runs(store, ["c_run", "a_run", "c_run"])] == ["c_run", "a_run"]
            assert [r.run for r in await select_runs(store, None, origin="rollout")] == ["b_run", "c_run"]
            with pytest.raises(BadInput, match="unknown run 'a_run'"):
                await select_runs(store, ["a_run"], origin="rollout")
            with pytest.raises(BadInput, match="unknown run 'ghost'.*a_run, b_run, c_run"):
                await select_runs(store, ["ghost"])
    run(main)


def test_calls_and_vectors_are_the_caches(tmp_path):
    async def main():
        async with open_store(tmp_path / "s.db") as store:
            store.calls.put_call(key="k", role="agent", model="m", request="{}", response='{"text": "x"}', ok=True,
                                 prompt_tokens=3, completion_tokens=2)
            assert (await store.calls.get_call("k"))["role"] == "agent"  # queued, readable before the commit
            store.vectors.put_vectors("e", {"h": b"\x00\x00\x80?"})
            await store.write(store.calls.use_statements("r", "episode:u1:1", [("agent", "k", False)]))
            assert await store.vectors.get_vectors("e", ["h", "missing"]) == {"h": b"\x00\x00\x80?"}
            assert await store.calls.artifact_tokens("r", "episode:u1:1") == 5
            assert await store.calls.counts() == (1, 0, 1)
    run(main)
