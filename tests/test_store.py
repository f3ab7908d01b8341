"""The artifact store: WAL, migrations, atomic writes, cache rows, and surviving kill -9."""
from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time

import anyio
import orjson
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
            store.calls.put_call(key="s1:abc", role="agent", model="m", request="{}", response='{"text": "x"}', ok=True)
            before = await store.calls.get_call("s1:abc")
            await store.flush()
            after = await store.calls.get_call("s1:abc")
            return before["response"], after["response"], store._pending_calls
    assert run(main) == ('{"text": "x"}', '{"text": "x"}', {})


def test_queued_rows_are_committed_once_they_have_waited_the_flush_interval(tmp_path, monkeypatch):
    """A killed command loses at most FLUSH_SECONDS of queued rows, not a whole batch."""
    import memaudit.store as store_module

    def row(key):
        return dict(key=key, role="agent", model="m", request="{}", response="{}", ok=True)

    async def main():
        async with open_store(tmp_path / "s.db") as store:
            store.calls.put_call(**row("s1:a"))
            await store.maybe_flush()  # young and far from a full batch: still queued
            queued = len(store._pending)
            monkeypatch.setattr(store_module, "FLUSH_SECONDS", 0.0)
            store.calls.put_call(**row("s1:b"))
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
                store.calls.put_call(key=f"k{{i}}-{{j}}", role="agent", model="m", request="{{}}",
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


def test_a_migration_merged_after_higher_numbers_is_still_applied(tmp_path, monkeypatch):
    """Numbers are reserved per change and may land out of order: the store applies every
    migration it has not recorded, whatever its user_version says."""
    import shutil

    import memaudit.store as store_module

    async def open_and_list(db):
        async with open_store(db) as store:
            tables = {r[0] for r in await store.fetchall("SELECT name FROM sqlite_master WHERE type='table'")}
            ledger = [r[0] for r in await store.fetchall("SELECT number FROM schema_migrations ORDER BY 1")]
            return tables, ledger, (await store.fetchone("PRAGMA user_version"))[0]

    schema = tmp_path / "db"
    shutil.copytree(REPO_ROOT / "db", schema)
    monkeypatch.setattr(store_module, "SCHEMA_DIR", schema)
    _, ledger, version = anyio.run(open_and_list, tmp_path / "s.db")
    (schema / "004_late.sql").write_text("CREATE TABLE late_arrival (x INTEGER);\n")
    tables, later, later_version = anyio.run(open_and_list, tmp_path / "s.db")
    assert 4 not in ledger and "late_arrival" in tables and later == sorted([*ledger, 4])
    assert later_version == version  # still the highest number applied


def test_a_store_from_before_the_ledger_gets_only_what_it_lacks(tmp_path, monkeypatch):
    """A store whose user_version alone recorded progress: the migrations up to it count as
    applied (running them again would fail: their tables exist), the others are applied."""
    import shutil

    import memaudit.store as store_module

    schema = tmp_path / "db"
    schema.mkdir()
    for number in store_module.LEDGERLESS_MIGRATIONS:
        [script] = (REPO_ROOT / "db").glob(f"{number:03d}_*.sql")
        shutil.copy(script, schema)
    monkeypatch.setattr(store_module, "SCHEMA_DIR", schema)
    anyio.run(_touch, tmp_path / "old.db")
    with sqlite3.connect(tmp_path / "old.db") as conn:  # as the runner before the ledger left it
        conn.execute("DROP TABLE schema_migrations")
    (schema / "009_later.sql").write_text("CREATE TABLE later_arrival (x INTEGER);\n")

    async def reopen():
        async with open_store(tmp_path / "old.db") as store:
            return [r[0] for r in await store.fetchall("SELECT number FROM schema_migrations ORDER BY 1")]
    assert anyio.run(reopen) == [9]


def test_a_store_from_a_newer_memaudit_is_refused_untouched(tmp_path):
    db = tmp_path / "s.db"
    anyio.run(_touch, db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version=42")
    with pytest.raises(BadInput, match="newer memaudit .schema 42"):
        anyio.run(lambda: Store.open(db))
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 42


async def _touch(db):
    async with open_store(db):
        pass


def test_derived_turn_and_snapshot_figures_are_filled_for_rows_written_before(tmp_path, monkeypatch):
    """db/015 stores whether the preference judge failed a turn and the adapter's count of lost
    memory writes beside the row; rows written before get them from the same JSON, and rows
    written after get the same values from the store's row builders."""
    import shutil

    import memaudit.store as store_module
    from memaudit.store.episodes import SnapshotRow, TurnRow

    schema = tmp_path / "db"
    shutil.copytree(REPO_ROOT / "db", schema)
    later = {path: path.read_text() for path in sorted(schema.glob("*.sql")) if path.name >= "015"}
    for path in later:  # db/015 and what came after it (db/020 adds the texts cut)
        path.unlink()
    monkeypatch.setattr(store_module, "SCHEMA_DIR", schema)
    failed = orjson.dumps([{"idx": 1, "score": None, "error": "no valid answer"}]).decode()
    rated = orjson.dumps([{"idx": 1, "score": 4}]).decode()

    async def before():
        async with open_store(tmp_path / "s.db") as store:
            await store.write([
                ("INSERT INTO runs(run, system, bench) VALUES ('r', 'mem0', 'b')", ()),
                ("INSERT INTO episodes VALUES ('r', 'u', 1, 'task', 'satisfied', 2, 4.0, NULL)", ()),
                *[("INSERT INTO turns VALUES ('r', 'u', 1, ?, 'reply', 'followup', 'text', NULL, ?, 0)", (n, p))
                  for n, p in ((1, failed), (2, rated))],
                *[("INSERT INTO snapshots VALUES ('r', ?, 1, ?, '[]', 0, 0.0)", (u, s))
                  for u, s in (("u", '{"write_failures": 3, "embed_truncated": 2}'), ("v", '{"items": []}'))]])

    async def after():
        async with open_store(tmp_path / "s.db") as store:
            turns = [tuple(r) for r in await store.fetchall("SELECT turn, judge_failed FROM turns ORDER BY turn")]
            lost = await store.episodes.last_write_failures("r")
            cut = await store.episodes.last_embed_truncated("r")
            outcomes = await store.episodes.outcomes("r")
        return turns, lost, cut, outcomes["judge_failures"]

    anyio.run(before)
    for path, script in later.items():
        path.write_text(script)
    assert anyio.run(after) == ([(1, 1), (2, 0)], {"u": 3, "v": None}, {"u": 2, "v": None}, 1)
    assert TurnRow("r", "u", 1, 1, "a", None, None, None, orjson.loads(failed)).judge_failed
    assert not TurnRow("r", "u", 1, 2, "a", None, None, 4.0, orjson.loads(rated)).judge_failed
    assert SnapshotRow("r", "u", 1, {"write_failures": 3}, [], 0, 0.0).write_failures == 3
    assert SnapshotRow("r", "u", 1, {"embed_truncated": 2}, [], 0, 0.0).embed_truncated == 2
    assert SnapshotRow("r", "v", 1, {"items": []}, [], 0, 0.0).write_failures is None
