"""`memaudit merge`: a study rolled out, scored and attributed as three shards and merged has the
tables of the unsharded study (token usage aside) and replays identically; merging again changes
nothing; a tampered cached response, another run config or a second merger is refused and leaves
the study's bytes as they were."""
from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
from dataclasses import replace

import pytest

from memaudit.cli import main
from memaudit.errors import BadInput
from memaudit.replay import replay_runs
from memaudit.scoring.attribution import attribute_runs
from memaudit.scoring.recovery import score_runs
from memaudit.tables.paper import compute_tables, without_measurements
from memaudit.store import open_store
from memaudit.store.merge import MergeBusy, merge_shards
from memaudit.shards import WHOLE, Shard
from tests.scoring.recorded import record, runtime, script

SYSTEMS = ("longctx_full", "nomem")


async def study(settings, fake, db, shard=WHOLE, **rollout):
    """A small study into `db`: rollout, both scoring modes and attribution, of one shard."""
    async with runtime(replace(settings, db=db), fake) as rt:
        rt.shard = shard
        runs = await record(rt, SYSTEMS, users=4, tasks=2, **rollout)
        await score_runs(rt, runs, ["dump_all", "retrieve"])
        await attribute_runs(rt, runs, ["dump_all", "retrieve"])


async def shards(settings, fake, tmp_path, n=3):
    paths = [tmp_path / f"shard{i}.db" for i in range(1, n + 1)]
    for i, path in enumerate(paths, 1):
        await study(settings, fake, path, Shard(i, n))
    return paths


async def tables(db):
    async with open_store(db) as store:
        found = without_measurements(await compute_tables(store, bootstrap=0))
    found.pop("tokens")
    for row in found["table2"]:  # token usage and what it buys: a shard pays for calls an unsharded run shared
        for key in [k for k in row if "tok" in k.lower()]:
            row.pop(key)
    return found


def cells(db):
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute("SELECT run, user_id FROM episodes GROUP BY run, user_id").fetchall())


@pytest.mark.anyio
async def test_three_shards_merge_into_the_unsharded_study(settings, fake, tmp_path):
    script(fake)
    whole = tmp_path / "whole.db"
    await study(settings, fake, whole)
    paths = await shards(settings, fake, tmp_path)
    assert sum(len(cells(p)) for p in paths) == len(cells(whole)) == 8  # disjoint cells, all of them
    into = tmp_path / "study.db"
    report = await merge_shards(paths, into)
    assert report.changed and cells(into) == cells(whole)
    assert await tables(into) == await tables(whole)
    requests = len(fake.requests)
    assert await replay_runs(replace(settings, db=into)) is None
    assert len(fake.requests) == requests

    before = into.read_bytes()
    again = await merge_shards(paths, into)
    assert not again.changed and all(not s.added for s in again.shards)
    assert into.read_bytes() == before
    assert not list(tmp_path.glob("*.merge.lock")) and not list(tmp_path.glob(".*.merging*"))


@pytest.mark.anyio
async def test_a_tampered_cached_response_is_refused_naming_the_key(settings, fake, tmp_path):
    script(fake)
    paths = await shards(settings, fake, tmp_path)
    into = tmp_path / "study.db"
    await merge_shards(paths, into)
    before = into.read_bytes()
    tampered = tmp_path / "tampered.db"
    shutil.copy(paths[1], tampered)
    with sqlite3.connect(tampered) as conn:
        key, role = conn.execute("SELECT key, role FROM calls WHERE ok=1 ORDER BY key LIMIT 1").fetchone()
        conn.execute("UPDATE calls SET response = response || ' ' WHERE key=?", (key,))
    with pytest.raises(BadInput) as refused:
        await merge_shards([tampered], into)
    message = str(refused.value)
    assert f"key {key} (role {role})" in message and "tampered.db" in message and str(into) in message
    assert into.read_bytes() == before
    assert not list(tmp_path.glob(".study.db.merging*"))


@pytest.mark.anyio
async def test_a_shard_made_with_another_run_config_is_refused_naming_the_run(settings, fake, tmp_path):
    script(fake)
    await study(settings, fake, tmp_path / "a.db", Shard(1, 2))
    await study(settings, fake, tmp_path / "b.db", Shard(2, 2), max_turns=3)
    with pytest.raises(BadInput, match=r"run 'longctx_full' was made differently in this shard: max_turns "
                                       r"\(recorded 2, now 3\)"):
        await merge_shards([tmp_path / "a.db", tmp_path / "b.db"], tmp_path / "study.db")
    assert not (tmp_path / "study.db").exists()


@pytest.mark.anyio
async def test_a_second_merger_is_busy(settings, fake, tmp_path):
    script(fake)
    await study(settings, fake, tmp_path / "a.db", Shard(1, 2))
    into = tmp_path / "study.db"
    fd = os.open(tmp_path / "study.db.merge.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(MergeBusy, match="^busy"):
            await merge_shards([tmp_path / "a.db"], into)
    finally:
        os.close(fd)
    assert not into.exists()


def test_merge_errors_are_one_line(tmp_path, capsys):
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    for args in (["merge", str(tmp_path / "missing.db"), "--into", str(tmp_path / "s.db")],
                 ["merge", str(tmp_path / "junk.db"), "--into", str(tmp_path / "s.db")]):
        with pytest.raises(SystemExit) as exit_info:
            main(args)
        err = capsys.readouterr().err.strip()
        assert exit_info.value.code == 2 and err.count("\n") == 0 and err.startswith("memaudit: error:")


@pytest.mark.anyio
async def test_a_failure_half_way_leaves_the_study_as_it_was(settings, fake, tmp_path, monkeypatch):
    import memaudit.store.merge as merge_module

    script(fake)
    paths = await shards(settings, fake, tmp_path)
    into = tmp_path / "study.db"
    await merge_shards(paths[:1], into)
    before = into.read_bytes()
    union, merged = merge_module._union, []

    def dies_on_the_second_shard(conn):
        if merged:
            raise KeyboardInterrupt  # as a kill would stop it: after one shard is in the copy
        merged.append(union(conn))
        return merged[-1]

    monkeypatch.setattr(merge_module, "_union", dies_on_the_second_shard)
    with pytest.raises(KeyboardInterrupt):
        await merge_shards(paths[1:], into)
    assert merged and into.read_bytes() == before
    assert not list(tmp_path.glob(".study.db.merging*"))
    monkeypatch.setattr(merge_module, "_union", union)
    assert (await merge_shards(paths[1:], into)).changed  # and the same merge then completes


async def record_stages(path, shard: Shard, stages=("rollout", "score", "attribute")) -> None:
    """What the shard's commands record when run with --shard (memaudit/cli/common.py)."""
    async with open_store(path) as store:
        for stage in stages:
            await store.shard_stages.record(stage, shard.index, shard.count)


@pytest.mark.anyio
async def test_a_missing_shard_is_refused_by_name_unless_partial(settings, fake, tmp_path):
    script(fake)
    paths = await shards(settings, fake, tmp_path)
    for i, path in enumerate(paths, 1):
        await record_stages(path, Shard(i, 3), ("rollout", "score") if i == 3 else ("rollout", "score", "attribute"))
    into = tmp_path / "study.db"
    with pytest.raises(BadInput) as refused:
        await merge_shards([paths[0], paths[2]], into)
    said = str(refused.value)
    assert "shard 2 of 3: no attribute, rollout, score" in said and "shard 3 of 3: no attribute" in said
    assert "--partial" in said and not into.exists()

    report = await merge_shards([paths[0], paths[2]], into, partial=True)
    assert report.changed and report.missing == ["shard 2 of 3: no attribute, rollout, score",
                                                 "shard 3 of 3: no attribute"]
    await record_stages(paths[2], Shard(3, 3), ("attribute",))
    final = await merge_shards([paths[1], paths[2]], into)  # the study holds shard 1 already
    assert final.missing == []
