"""Faults of the store file (read-only, full disk …) are one-line errors naming the store, on every
command that writes: never a sqlite traceback."""
from __future__ import annotations

import shutil
import sqlite3
import subprocess

import anyio
import pytest

from memaudit.cli import main
from memaudit.cli.common import run
from memaudit.errors import BadInput
from memaudit.rollout.runner import run_rollout
from memaudit.scoring.recovery import score_runs
from memaudit.store import open_store, store_fault
from tests.rollout.conftest import make_bench
from tests.scoring.recorded import record, runtime, script


def test_known_faults_become_one_line_errors_and_bugs_do_not():
    fault = store_fault(sqlite3.OperationalError("attempt to write a readonly database"), "s.db")
    assert isinstance(fault, BadInput) and str(fault).startswith("file s.db: attempt to write a readonly database")
    assert "read-only" in str(fault)
    assert store_fault(sqlite3.OperationalError("no such column: x"), "s.db") is None
    assert store_fault(ValueError("readonly database"), "s.db") is None


def test_a_fault_met_outside_the_store_write_path_is_one_line_too(tmp_path):
    """Not only `write`: every statement the store runs (here a write through its read path) turns
    a fault into the store's one-line error; a bug still keeps its traceback."""
    async def reads_a_full_disk():
        async with open_store(tmp_path / "s.db") as store:
            (pages,) = await store.fetchone("PRAGMA page_count")
            await store.conn.execute(f"PRAGMA max_page_count={pages}")  # the disk is full from here on
            await store.fetchall("INSERT INTO runs(run, system, bench, config) VALUES (?,?,?,?) RETURNING run",
                                 ("r", "nomem", "b", "x" * 20000))

    with pytest.raises(BadInput, match="the disk holding the store is full"):
        run(reads_a_full_disk)

    async def has_a_bug():
        async with open_store(tmp_path / "s.db") as store:
            await store.fetchall("SELECT * FROM nope")

    with pytest.raises(sqlite3.OperationalError):
        run(has_a_bug)


@pytest.mark.anyio
async def test_score_and_rollout_on_a_read_only_store(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        runs = await record(rt, ("longctx_full",), users=1, tasks=1)
        await rt.store.conn.execute("PRAGMA query_only=1")  # what a read-only file gives: SQLITE_READONLY
        with pytest.raises(BadInput) as info:
            await score_runs(rt, runs, ["dump_all"])
        assert "attempt to write a readonly database" in str(info.value) and str(settings.db) in str(info.value)
        with pytest.raises(BadInput, match="read-only"):
            await run_rollout(rt, make_bench(n_users=1, n_tasks=1), ["nomem"], max_turns=2, progress=False)
        await rt.store.conn.execute("PRAGMA query_only=0")


def test_the_score_command_on_an_immutable_store_file(tmp_path, capsys):
    """End to end on a file the system refuses to write (needs root and chattr, as on CI)."""
    db = tmp_path / "s.db"

    async def fill():
        async with open_store(db) as store:
            await store.benchmarks.save(make_bench(n_users=1, n_tasks=1))
            await store.runs.ensure("nomem", "nomem", "tiny")
    anyio.run(fill)
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here")
    try:
        for args in (["score", "--mode", "dump_all"], ["rollout", "--bench", "tiny", "--systems", "nomem"]):
            with pytest.raises(SystemExit) as exit_info:
                main([*args, "--db", str(db), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
            assert exit_info.value.code == 2
            err = capsys.readouterr().err
            assert err.startswith("memaudit: error:") and "readonly" in err and len(err.strip().splitlines()) == 1
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


@pytest.mark.anyio
async def test_a_commit_failing_on_a_full_disk_keeps_its_cache_rows_queued(tmp_path):
    """The probe's full disk during `score`: SQLite's page limit stands in for a small tmpfs. The
    failed commit must leave the cache rows queued, so the next commit (the one whose call_uses
    point at them) carries them: no dangling call_uses, nothing to re-ask the model for."""
    async with open_store(tmp_path / "s.db") as store:
        await store.write([("INSERT INTO runs(run, system, bench) VALUES (?,?,?)", ("r", "nomem", "b"))])
        (pages,) = await store.fetchone("PRAGMA page_count")
        await store.conn.execute(f"PRAGMA max_page_count={pages}")  # the disk is full from here on
        store.calls.put_call(key="s1:lost", role="recovery_judge", model="m", request="{}",
                       response='{"text": "' + "x" * 20000 + '"}', ok=True)
        with pytest.raises(BadInput, match="disk holding the store is full"):
            await store.write(store.calls.use_statements("r", "recon:a", [("recovery_judge", "s1:lost", False)]))
        assert (await store.calls.get_call("s1:lost")) is not None  # still answered from the queue
        await store.conn.execute("PRAGMA max_page_count=1073741823")  # space again
        await store.write(store.calls.use_statements("r", "recon:b", [("recovery_judge", "s1:lost", False)]))
        dangling = await store.fetchone("SELECT COUNT(*) FROM call_uses u LEFT JOIN calls c ON c.key=u.key "
                                        "WHERE c.key IS NULL")
        assert dangling[0] == 0 and (await store.fetchone("SELECT COUNT(*) FROM calls"))[0] == 1
