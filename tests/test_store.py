"""The artifact store: WAL, migrations, atomic writes, cache rows, and surviving kill -9."""
from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time

import anyio
import pytest

from memaudit.config import REPO_ROOT
from memaudit.errors import BadInput
from memaudit.store import Store, open_store


def run(fn):
    return anyio.run(fn)


def test_store_uses_wal_and_a_busy_timeout(tmp_path):
    async def main():
        async with open_store(tmp_path / "s.db") as store:
            mode = (await store.fetchone("PRAGMA journal_mode"))[0]
            busy = (await store.fetchone("PRAGMA busy_timeout"))[0]
            return mode, busy
    mode, busy = run(main)
    assert mode == "wal" and busy > 0


def test_migrations_are_idempotent(tmp_path):
    scripts = sorted(p.name for p in (REPO_ROOT / "db").glob("[0-9][0-9][0-9]_*.sql"))

    async def version_and_tables():
        async with open_store(tmp_path / "s.db") as store:
            version = (await store.fetchone("PRAGMA user_version"))[0]
            tables = [r[0] for r in await store.fetchall("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
            return version, tables
    first = run(version_and_tables)
    second = run(version_and_tables)
    assert first == second
    assert first[0] == int(scripts[-1][:3])
    assert {"calls", "call_uses", "runs", "episodes", "embeddings"} <= set(first[1])


def test_a_failed_write_rolls_back_everything(tmp_path):
    async def main():
        async with open_store(tmp_path / "s.db") as store:
            good = ("INSERT INTO runs(run, system, bench) VALUES (?,?,?)", ("r1", "nomem", "sample"))
            bad = ("INSERT INTO no_such_table VALUES (?)", (1,))
            with pytest.raises(sqlite3.OperationalError):
                await store.write([good, bad])
            n = (await store.fetchone("SELECT COUNT(*) FROM runs"))[0]
            await store.write([good])  # the store is usable afterwards
            return n, (await store.fetchone("SELECT COUNT(*) FROM runs"))[0]
    assert run(main) == (0, 1)


def test_queued_cache_rows_are_readable_before_and_after_commit(tmp_path):
    async def main():
        async with open_store(tmp_path / "s.db") as store:
            store.put_call(key="s1:abc", role="agent", model="m", request="{}", response='{"text": "x"}', ok=True)
            before = await store.get_call("s1:abc")
            await store.flush()
            after = await store.get_call("s1:abc")
            return before["response"], after["response"], store._pending_calls
    assert run(main) == ('{"text": "x"}', '{"text": "x"}', {})


def test_queued_rows_are_committed_once_they_have_waited_the_flush_interval(tmp_path, monkeypatch):
    """A killed command loses at most FLUSH_SECONDS of queued rows, not a whole batch."""
    import memaudit.store as store_module

    def row(key):
        return dict(key=key, role="agent", model="m", request="{}", response="{}", ok=True)

    async def main():
        async with open_store(tmp_path / "s.db") as store:
            store.put_call(**row("s1:a"))
            await store.maybe_flush()  # young and far from a full batch: still queued
            queued = len(store._pending)
            monkeypatch.setattr(store_module, "FLUSH_SECONDS", 0.0)
            store.put_call(**row("s1:b"))
            await store.maybe_flush()
            with sqlite3.connect(tmp_path / "s.db") as other:  # what a kill right now would leave
                committed = other.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            return queued, committed
    assert run(main) == (1, 2)


def test_not_a_store_is_bad_input(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(BadInput, match="junk.db"):
        run(lambda: Store.open(path))


WRITER = """
import anyio, sys
sys.path.insert(0, {root!r})
from memaudit.store import open_store
async def main():
    async with open_store({db!r}) as store:
        i = 0
        while True:
            for j in range(50):
                store.put_call(key=f"k{{i}}-{{j}}", role="agent", model="m", request="{{}}",
                               response='{{"text": "' + "x" * 500 + '"}}', ok=True)
            await store.write([("INSERT INTO runs(run, system, bench) VALUES (?,?,?)", (f"r{{i}}", "nomem", "b"))])
            if i == 20:
                print("ready", flush=True)
            i += 1
anyio.run(main)
"""


def test_kill_minus_9_mid_write_leaves_a_readable_store(tmp_path):
    db = tmp_path / "crash.db"
    proc = subprocess.Popen([sys.executable, "-c", WRITER.format(root=str(REPO_ROOT), db=str(db))],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    async def main():
        async with open_store(db) as store:
            ok = (await store.fetchone("PRAGMA integrity_check"))[0]
            runs = (await store.fetchone("SELECT COUNT(*) FROM runs"))[0]
            calls = (await store.fetchone("SELECT COUNT(*) FROM calls"))[0]
            return ok, runs, calls
    ok, runs, calls = run(main)
    assert ok == "ok"
    assert runs > 20 and calls == runs * 50  # every committed transaction is whole
