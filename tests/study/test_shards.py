"""`--shard I/N`: the spec, the cell hash, and the shard filter in each stage."""
from __future__ import annotations

import sqlite3

import pytest

from memaudit.cli import main
from memaudit.errors import BadInput
from memaudit.shards import WHOLE, Shard, cell_shard, parse_shard

EXPECTED = [1, 3, 3, 3]


def test_the_spec_is_one_based_and_bad_specs_are_refused():
    assert parse_shard("3/16") == Shard(3, 16) and parse_shard(" 1 / 1 ") == Shard(1, 1)
    assert parse_shard(None) == WHOLE
    for bad in ("0/3", "4/3", "1/0", "a/3", "3", "1/2/3", "-1/3", ""):
        with pytest.raises(BadInput, match="--shard"):
            parse_shard(bad)


def test_every_cell_is_in_exactly_one_shard_and_the_hash_is_stable():
    cells = [(s, f"user_{u:03d}") for s in ("nomem", "amem", "mem0") for u in range(1, 51)]
    shards = [Shard(i, 4) for i in range(1, 5)]
    assert all(sum(shard.holds(*cell) for shard in shards) == 1 for cell in cells)
    assert all(WHOLE.holds(*cell) for cell in cells)
    assert len({cell_shard(*cell, 4) for cell in cells}) == 4  # every shard gets work
    # the first 8 bytes of sha256("nomem\0user_001"), big-endian, modulo N, plus one: the same everywhere
    assert [cell_shard("nomem", "user_001", n) for n in (2, 3, 7, 16)] == EXPECTED


@pytest.mark.parametrize("command", [["rollout", "--bench", "sample", "--systems", "nomem"],
                                     ["score", "--mode", "dump_all"], ["attribute", "--mode", "dump_all"],
                                     ["utilization"]])
def test_a_bad_shard_is_one_line_naming_the_option(command, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--shard", "5/4", "--db", str(tmp_path / "s.db")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.count("\n") == 0 and "--shard 5/4" in err
    assert not (tmp_path / "s.db").exists()  # refused before anything was opened


SLURM_ARRAY_10_12 = {"SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_MAX": "12", "SLURM_ARRAY_TASK_COUNT": "3",
                     "SLURM_ARRAY_TASK_STEP": "1"}


def scheduler_envs(i: int) -> dict[str, dict[str, str]]:
    """The variables each scheduler sets for the i-th (1-based) of 3 workers."""
    return {"slurm": {**SLURM_ARRAY_10_12, "SLURM_ARRAY_TASK_ID": str(9 + i)},
            "kubernetes": {"JOB_COMPLETION_INDEX": str(i - 1), "MEMAUDIT_SHARDS": "3"},
            "launcher": {"RANK": str(i - 1), "WORLD_SIZE": "3"}}


@pytest.mark.parametrize("scheduler", ["slurm", "kubernetes", "launcher"])
def test_auto_reads_each_scheduler_as_the_same_shard_of_three(scheduler):
    assert [parse_shard("auto", scheduler_envs(i)[scheduler]) for i in (1, 2, 3)] == [Shard(i, 3) for i in (1, 2, 3)]


def test_auto_takes_any_array_start_and_step_and_slurm_first():
    stepped = {"SLURM_ARRAY_TASK_ID": "20", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "4",
               "SLURM_ARRAY_TASK_STEP": "10"}
    assert parse_shard("auto", stepped) == Shard(3, 4)
    both = {**scheduler_envs(2)["slurm"], **scheduler_envs(3)["launcher"]}
    assert parse_shard("auto", both) == Shard(2, 3)


@pytest.mark.parametrize("env, says", [
    ({}, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_MIN/SLURM_ARRAY_TASK_COUNT; JOB_COMPLETION_INDEX/MEMAUDIT_SHARDS; "
         "RANK/WORLD_SIZE"),
    ({"JOB_COMPLETION_INDEX": "0"}, "MEMAUDIT_SHARDS is not"),
    ({"SLURM_ARRAY_TASK_ID": "3"}, "SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_COUNT is not"),
    ({"RANK": "3", "WORLD_SIZE": "3"}, "outside 1..3"),
    ({"RANK": "x", "WORLD_SIZE": "3"}, "RANK must be a whole number"),
    ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "3",
      "SLURM_ARRAY_TASK_STEP": "2"}, "not on the array's grid"),
])
def test_auto_outside_a_scheduler_is_one_line_naming_what_it_looked_for(env, says):
    with pytest.raises(BadInput, match="--shard auto") as refused:
        parse_shard("auto", env)
    assert says in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("scheduler", ["slurm", "kubernetes"])
def test_auto_plays_the_users_of_the_same_shard_i_of_3(scheduler, tmp_path, monkeypatch):
    """The acceptance: a rollout with --shard auto under each scheduler's variables plays exactly the
    (system, user) cells of --shard i/3."""
    from tests.rollout.test_cli_inprocess import store_tiny_bench

    def played(db, shard, env=None):
        store_tiny_bench(db)
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        main(["rollout", "--bench", "tiny", "--systems", "nomem,longctx_full,bm25", "--base-url", url,
              "--model", "fake", "--db", str(db), "--tasks", "1", "--max-turns", "1", "--quiet", "--shard", shard])
        for name in env or {}:
            monkeypatch.delenv(name)
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT stage, shard, shards FROM shard_stages").fetchall() == \
                [("rollout", int(shard[0]) if shard != "auto" else i, 3)]
            return sorted(conn.execute("SELECT DISTINCT run, user_id FROM episodes").fetchall())

    from memaudit.testing.http_server import serve

    with serve() as url:
        for i in (1, 2, 3):
            auto = played(tmp_path / f"auto{i}.db", "auto", scheduler_envs(i)[scheduler])
            assert auto == played(tmp_path / f"fixed{i}.db", f"{i}/3")


def test_every_command_that_takes_a_shard_records_the_stage_it_ran():
    """A path that skips the record would let the merge take a study without that shard's stage."""
    import click

    from memaudit.cli import cli

    ctx = click.Context(cli)
    sharded = {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}
    sharded = {name: c for name, c in sharded.items() if any(p.name == "shard" for p in getattr(c, "params", ()))}
    assert set(sharded) == {"rollout", "score", "attribute", "utilization", "judge-check"}
    assert all(getattr(c.callback, "records_shard_stage", False) for c in sharded.values()), sharded


def test_a_shard_lists_and_stores_only_the_systems_it_holds(tmp_path, capsys):
    """A system none of whose cells falls in the shard is not listed with `0 episodes`: one line says
    its cells are other shards' (its run is still opened: the study's later sharded commands name it)."""
    from memaudit.testing.http_server import serve

    held = {system: cell_shard(system, "user_001", 2) for system in ("nomem", "bm25")}
    assert sorted(held.values()) == [1, 2]  # one system in each shard
    with serve() as url:
        for i in (1, 2):
            db = tmp_path / f"shard{i}.db"
            main(["rollout", "--bench", "sample", "--systems", "nomem,bm25", "--users", "1", "--tasks", "1",
                  "--max-turns", "1", "--quiet", "--base-url", url, "--model", "fake", "--db", str(db),
                  "--shard", f"{i}/2"])
            mine, other = sorted(held, key=lambda system: held[system] != i)
            printed = capsys.readouterr().out
            assert f"{mine}: 1 episodes" in printed and f"{other}: 0 episodes" not in printed
            assert f"shard {i}/2: no (system, user) cell of {other} falls in this shard" in printed
            with sqlite3.connect(db) as conn:
                assert sorted(conn.execute("SELECT run FROM runs").fetchall()) == [("bm25",), ("nomem",)]
