"""The artifact store: one SQLite file holds benchmarks, runs, transcripts, memory snapshots,
reconstructions, attributions, the call cache and embedding vectors.

This package is the only code that knows the schema (db/*.sql). `Store` owns the connection and
the one writer; each group of tables has a typed repository, reachable from the store:

    store.benchmarks    benchmarks, users, bank entries, tasks            (store/benchmarks.py)
    store.runs          runs and their RunConfig; select_runs; run locks  (store/runs.py)
    store.episodes      episodes, turns, memory snapshots                 (store/episodes.py)
    store.scores        scoring passes (PassConfig), reconstructions      (store/scores.py)
    store.attributions  attributions, oracle verdicts                     (store/attributions.py)
    store.evolving      criteria of evolving targets                      (store/evolving.py)
    store.calls         calls, call_uses, param_refusals (CallCache)      (store/calls.py)
    store.vectors       embeddings (the embedder's VectorCache)           (store/calls.py)
    store.judges        panel verdicts, judge-check controls, human grades (store/judges.py)
    store.utilization   Act scenarios, utilization passes, Know/Act cases  (store/utilization.py)
    store.plans         cost estimates made before a run (memaudit plan)  (store/plans.py)
    store.batches       calls waiting for a Batch API result, batches     (store/batches.py)

Rows, not rules: the store reads and writes rows; what they mean lives in the stages. Writes are
statements the repositories build (a table's columns are spelled once, by its typed Row), committed
with `write`; `add` writes typed rows directly. What SQLite reports about the file (read-only, full
disk, locked, damaged, not a store) leaves the store as one StoreError naming it (store/faults.py).
All writes go through one lock (one writer). Cache rows and other rows that may be lost on a
crash (they are recomputed from the cache on resume) are queued and committed together with the
next artifact transaction, when the batch is full, or once they have waited FLUSH_SECONDS: a
killed command loses at most about that much work.
"""
from __future__ import annotations

import itertools
import sqlite3
import time
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Iterable

import aiosqlite
import anyio

from memaudit.canonical import dumps_indented
from memaudit.errors import StoreError
from memaudit.resources import data_dir
from memaudit.store.attributions import Attributions
from memaudit.store.batches import Batches
from memaudit.store.benchmarks import BankEntryRow, BenchmarkRow, Benchmarks, TaskRow, UserRow
from memaudit.store.calls import CallRow, Calls, CallUseRow, Vectors
from memaudit.store.episodes import EpisodeRow, Episodes, SnapshotRow, TurnRow
from memaudit.store.faults import faults, not_a_store, store_fault
from memaudit.store.judges import Judges
from memaudit.store.evolving import Evolving
from memaudit.store.plans import Plans
from memaudit.store.rows import Row, Statement, dumps, loads
from memaudit.store.runs import Run, RunBusy, RunConfig, RunRow, Runs, select_runs
from memaudit.store.shard_stages import ShardStages
from memaudit.store.utilization import Utilization
from memaudit.store.scores import PassConfig, Rescore, Scores, ScorePass
from memaudit.types import Attribution, Reconstruction

__all__ = ["Store", "StoreError", "open_store", "store_fault", "Statement", "dumps", "dumps_indented", "loads", "Run",
           "RunBusy", "RunConfig", "PassConfig", "Rescore", "ScorePass", "select_runs", "Row", "BenchmarkRow",
           "UserRow", "BankEntryRow", "TaskRow", "RunRow", "EpisodeRow", "TurnRow", "SnapshotRow", "CallRow",
           "CallUseRow"]

SCHEMA_DIR = data_dir("db")
# Which migrations a store records as applied; created with the first migration applied after it.
MIGRATIONS_TABLE = "CREATE TABLE IF NOT EXISTS schema_migrations (number INTEGER PRIMARY KEY, name TEXT NOT NULL);"
# The migrations that existed while only user_version recorded progress (all numbers up to it).
LEDGERLESS_MIGRATIONS = (1, 2, 3, 5, 6)
BATCH = 256
FLUSH_SECONDS = 1.0


def _check_place(path: Path, create: bool) -> None:
    """A path that cannot hold a store file, or (without `create`) holds none, is one line."""
    if path.is_dir():
        raise StoreError("is a directory, not a store file; give --db a file path", file=str(path))
    if not create and not path.exists():
        raise StoreError("no store here (nothing has been run or imported into it); check --db", file=str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the store's folder: {exc.strerror}", file=str(path)) from None


class Store:
    def __init__(self, conn: aiosqlite.Connection, path: Path):
        self.conn = conn
        self.path = path
        self._lock = anyio.Lock()
        self._pending: list[Statement] = []
        self._pending_calls: dict[str, dict] = {}  # cache rows queued but not yet committed
        # Cache lookups are primary-key reads on the hot path of every call (replay reads
        # thousands per second): a second, read-only connection answers them in the event-loop
        # thread, which WAL allows beside the writer, instead of a round trip to aiosqlite's thread.
        self._reader: sqlite3.Connection | None = None
        self._last_commit = time.monotonic()
        self.benchmarks = Benchmarks(self)
        self.runs = Runs(self)
        self.episodes = Episodes(self)
        self.scores = Scores(self)
        self.attributions = Attributions(self)
        self.calls = Calls(self)
        self.vectors = Vectors(self)
        self.utilization = Utilization(self)
        self.judges = Judges(self)
        self.evolving = Evolving(self)
        self.plans = Plans(self)
        self.batches = Batches(self)
        self.shard_stages = ShardStages(self)

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    async def open(cls, path: str | Path, *, create: bool = True) -> "Store":
        """Open (with `create`, make) the store at `path`. Commands that only read pass
        create=False: on a path holding no store they fail in one line and leave no file behind."""
        path = Path(path)
        if str(path) != ":memory:":
            _check_place(path, create)
        try:
            conn = await aiosqlite.connect(str(path), isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store: {exc}", file=str(path)) from None
        conn.row_factory = sqlite3.Row
        store = cls(conn, path)
        try:
            with not_a_store(path):
                await store._setup()
        except BaseException:
            await conn.close()
            raise
        return store

    async def _setup(self) -> None:
        """Connection settings, migrations, and the read-only connection of the cache lookups."""
        conn, path = self.conn, self.path
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA busy_timeout=30000")
        await conn.execute("PRAGMA synchronous=NORMAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        await self._migrate()
        if str(path) != ":memory:":
            self._reader = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self._reader.row_factory = sqlite3.Row
            self._reader.execute("PRAGMA busy_timeout=30000")
            self._reader.execute("PRAGMA query_only=1")

    async def close(self) -> None:
        # Shielded: a cancelled command (Ctrl-C, SIGTERM) still commits its queued rows and stops
        # the connection's thread, which would otherwise keep the process alive after its end.
        with anyio.CancelScope(shield=True):
            try:
                await self.flush()
            finally:  # a flush that fails (a full disk) still closes the connections
                if self._reader is not None:
                    self._reader.close()
                await self.conn.close()

    async def __aenter__(self) -> "Store":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _migrate(self) -> None:
        """Apply every migration this store has not recorded, in number order, each in its own
        transaction with its record; user_version holds the highest number applied. Numbers need
        not arrive in order (a lower-numbered file merged after a higher one is still applied)."""
        (version,) = (await self.conn.execute_fetchall("PRAGMA user_version"))[0]
        scripts = {int(p.name[:3]): p for p in SCHEMA_DIR.glob("[0-9][0-9][0-9]_*.sql")}
        applied = await self._applied_migrations(version)
        newer = sorted(applied - set(scripts)) or ([version] if version > max(scripts) else [])
        if newer:
            raise StoreError(f"the store was written by a newer memaudit (schema {max(newer)}; this one knows up to "
                           f"{max(scripts)}); upgrade memaudit to open it", file=str(self.path))
        for number in sorted(set(scripts) - applied):
            await self.conn.executescript(
                f"BEGIN;\n{MIGRATIONS_TABLE}\n{scripts[number].read_text()}\n"
                f"INSERT INTO schema_migrations(number, name) VALUES ({number}, '{scripts[number].name}');\n"
                f"PRAGMA user_version={max(version, number)};\nCOMMIT;")
            version = max(version, number)

    async def _applied_migrations(self, version: int) -> set[int]:
        rows = await self.conn.execute_fetchall(
            "SELECT name FROM sqlite_master WHERE type='table' AND name='schema_migrations'")
        if rows:
            return {n for (n,) in await self.conn.execute_fetchall("SELECT number FROM schema_migrations")}
        # A store from before the ledger: user_version counted the migrations that existed then.
        return {n for n in LEDGERLESS_MIGRATIONS if n <= version}

    async def is_empty(self) -> bool:
        """No row in any table but the migrations' record (queued rows count as rows)."""
        if self._pending:
            return False
        with anyio.CancelScope(shield=True):
            tables = [r[0] for r in await self.fetchall("SELECT name FROM sqlite_master WHERE type='table' "
                                                        "AND name NOT LIKE 'sqlite_%' AND name != 'schema_migrations'")]
            for table in tables:
                if await self.fetchone(f'SELECT 1 FROM "{table}" LIMIT 1') is not None:
                    return False
        return True

    # -- generic access --------------------------------------------------------------------
    async def fetchall(self, sql: str, params: Iterable = ()) -> list[sqlite3.Row]:
        with faults(self.path):
            return list(await self.conn.execute_fetchall(sql, tuple(params)))

    async def iterate(self, sql: str, params: Iterable = (), batch: int = 2000):
        """The rows of a query, fetched `batch` at a time: a study-wide read that is folded as it
        goes (per-user figures) holds one batch, not every row."""
        async with self.conn.execute(sql, tuple(params)) as cursor:
            while rows := await cursor.fetchmany(batch):
                for row in rows:
                    yield row

    async def fetchone(self, sql: str, params: Iterable = ()) -> sqlite3.Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def write(self, statements: list[Statement]) -> None:
        """Commit the statements (and any pending cache rows) in one transaction."""
        async with self._lock:
            with faults(self.path):
                await self._write(statements)

    async def _write(self, statements: list[Statement]) -> None:
        queued = list(self._pending)
        committing = list(self._pending_calls)
        await self._commit(queued, list(statements))
        # Only a commit that completed takes rows off the queue: a failed one (a full disk)
        # leaves them for the next, so nothing committed later can point at a lost cache row.
        # Rows queued during the commit stay queued after those it took.
        del self._pending[:len(queued)]
        # Only now are the queued cache rows readable from the table: dropping them earlier
        # would let a lookup during the commit miss a call that was already made.
        for key in committing:
            self._pending_calls.pop(key, None)

    async def write_stream(self, batches: Iterable[list[Statement]], *, commit_every: int | None = None) -> None:
        """Commit lazily produced batches (a large import) in one transaction: all land, or none do
        (an exception raised while producing a batch rolls everything back). Within a batch, the
        statements are grouped by SQL, in order of first appearance, and each group goes through one
        executemany: a batch must not depend on interleaving (parents before children is kept).
        Every `commit_every` bytes of text and blobs written, commit and go on in a new transaction:
        for a store whose writer makes the whole write atomic otherwise (store/sidefile.py), so that
        the WAL stays small (bytes, not rows: one memory snapshot row can hold a megabyte)."""
        await self.flush()
        async with self._lock:
            with faults(self.path, conflicts=True):
                await self._stream(batches, commit_every)

    async def _stream(self, batches: Iterable[list[Statement]], commit_every: int | None) -> None:
        written = 0
        try:
            await self.conn.execute("BEGIN IMMEDIATE")
            for batch in batches:
                groups: dict[str, list[tuple]] = {}
                for sql, params in batch:
                    groups.setdefault(sql, []).append(params)
                for sql, rows in groups.items():
                    await self.conn.executemany(sql, rows)
                written += sum(len(v) for _, params in batch for v in params if isinstance(v, (str, bytes)))
                if commit_every is not None and written >= commit_every:
                    await self.conn.execute("COMMIT")
                    await self.conn.execute("BEGIN IMMEDIATE")
                    written = 0
        except BaseException:
            await self._rollback()
            raise
        await self.conn.execute("COMMIT")

    def write_later(self, statements: list[Statement]) -> None:
        """Queue statements for the next commit: independent upserts into tables without foreign
        keys (they may be reordered across tables), and rows a resume recomputes from the cache
        (losing the last second of them on a crash costs that second, nothing else)."""
        if not self._pending:
            self._last_commit = time.monotonic()  # the age of the oldest queued row counts
        self._pending.extend(statements)

    async def flush(self) -> None:
        if self._pending:
            await self.write([])

    async def maybe_flush(self) -> None:
        """Commit the queue when it is full or its oldest row has waited FLUSH_SECONDS. Returns at
        once while another commit runs: the queued rows go with the next one."""
        if self._lock.locked() or not self._pending:
            return
        if len(self._pending) >= BATCH or time.monotonic() - self._last_commit >= FLUSH_SECONDS:
            await self.flush()

    async def _commit(self, queued: list[Statement], statements: list[Statement]) -> None:
        if not queued and not statements:
            return
        # Each executemany is one hop to the database thread. Queued rows are upserts into tables
        # without foreign keys (calls, call uses, reconstructions, attributions, vectors), so
        # however they interleave they go as one executemany per statement; the caller's own
        # statements keep their order, runs of the same statement (turns) going together.
        groups: dict[str, list[tuple]] = {}
        for sql, params in queued:
            groups.setdefault(sql, []).append(params)
        runs = [(sql, [params for _, params in group])
                for sql, group in itertools.groupby(statements, key=lambda st: st[0])]
        try:
            await self.conn.execute("BEGIN IMMEDIATE")
            for sql, rows in [*groups.items(), *runs]:
                await self.conn.executemany(sql, rows)
        except BaseException:
            await self._rollback()
            raise
        await self.conn.execute("COMMIT")

    async def _rollback(self) -> None:
        """Roll back the open transaction, if SQLite has not already (it does itself on a full
        disk), even when the write was cancelled. A cancelled statement still runs in the
        connection's thread: a first no-op waits for it, so a BEGIN cancelled on its way leaves no
        transaction open behind it (the next write's BEGIN would fail)."""
        with anyio.CancelScope(shield=True):
            await self.conn.execute_fetchall("SELECT 1")
            if self.conn.in_transaction:
                await self.conn.execute("ROLLBACK")

    async def add(self, rows: Iterable) -> None:
        """Typed rows (a repository's Row, a Reconstruction or an Attribution) in one transaction:
        consecutive rows of one table go through one executemany (stores built directly from rows:
        synthetic studies, fixtures)."""
        await self.write([_ROW_STATEMENTS[type(row)](row) if type(row) in _ROW_STATEMENTS else row.statement()
                          for row in rows])


# The domain records a row of which the store writes through its repository's builder.
_ROW_STATEMENTS = {Reconstruction: Scores.reconstruction_statement, Attribution: Attributions.statement}


@asynccontextmanager
async def open_store(path: str | Path, *, create: bool = True):
    """The store for one command. A command that fails having written nothing into a store it
    created (an unknown system, a bad benchmark) leaves no store file behind."""
    created = str(path) != ":memory:" and not Path(path).exists()
    store = await Store.open(path, create=create)
    try:
        yield store
    except BaseException:
        # The command's own failure is what the user needs to see, not one met while cleaning up.
        empty = False
        with suppress(Exception):
            empty = created and await store.is_empty()
        with suppress(Exception):
            await store.close()
        if empty:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        raise
    await store.close()
