"""The artifact store: one SQLite file holds benchmarks, runs, transcripts, memory snapshots,
reconstructions, attributions, the call cache and embedding vectors.

Rows, not rules: this module reads and writes rows; what they mean lives in the stages.
All writes go through one lock (one writer); cache rows are batched and committed together
with the next artifact transaction, or when the batch is full.
"""
from __future__ import annotations

import fcntl
import itertools
import os
import sqlite3
from contextlib import asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterable

import aiosqlite
import anyio
import orjson

from memaudit.errors import BadInput
from memaudit.resources import data_dir
from memaudit.types import (Attribution, BankEntry, Benchmark, Episode, PoolEntry, Reconstruction, Task,
                            Turn, User)

SCHEMA_DIR = data_dir("db")
BATCH = 256

Statement = tuple[str, tuple]
# SQLite errors that are faults of the store file or its place, not bugs: each becomes one line.
STORE_FAULTS = {
    "readonly database": "the store is read-only; make the file and its directory writable, or copy it and "
                         "give --db the copy",
    "unable to open database": "the store cannot be opened for writing; check the directory's permissions",
    "disk is full": "the disk holding the store is full",
    "disk I/O error": "the disk holding the store failed to read or write",
    "database is locked": "another process held the store locked for too long; retry when it is done",
}


def store_fault(exc: BaseException, path) -> BadInput | None:
    """The one-line error for a store fault (read-only file, full disk …), or None when `exc` is
    not one of them (a bug keeps its traceback)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return None
    for phrase, advice in STORE_FAULTS.items():
        if phrase in str(exc):
            return BadInput(f"{exc}: {advice}", file=str(path) if path is not None else None)
    return None


RECONSTRUCTION_COLUMNS = ("run", "mode", "k", "variant", "user_id", "category", "dimension", "explanation",
                          "ground_truth", "evidence", "label", "reason", "score", "judge_reason", "status", "error",
                          "snapshot_task")


class RunBusy(BadInput):
    """Another process is writing this run (a second `rollout` of the same run)."""


def dumps(obj: Any) -> str:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()


def loads(text: str | bytes | None) -> Any:
    return None if text is None else orjson.loads(text)


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

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    async def open(cls, path: str | Path) -> "Store":
        path = Path(path)
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = await aiosqlite.connect(str(path), isolation_level=None)
        except sqlite3.Error as exc:
            raise BadInput(f"cannot open store: {exc}", file=str(path)) from None
        conn.row_factory = sqlite3.Row
        store = cls(conn, path)
        try:
            await conn.execute("PRAGMA journal_mode=WAL")
            await conn.execute("PRAGMA busy_timeout=30000")
            await conn.execute("PRAGMA synchronous=NORMAL")
            await conn.execute("PRAGMA foreign_keys=ON")
            await store._migrate()
            if str(path) != ":memory:":
                store._reader = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
                store._reader.row_factory = sqlite3.Row
                store._reader.execute("PRAGMA busy_timeout=30000")
                store._reader.execute("PRAGMA query_only=1")
        except sqlite3.DatabaseError as exc:
            await conn.close()
            raise store_fault(exc, path) or BadInput(f"not a memaudit store: {exc}", file=str(path)) from None
        return store

    async def close(self) -> None:
        await self.flush()
        if self._reader is not None:
            self._reader.close()
        await self.conn.close()

    async def __aenter__(self) -> "Store":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _migrate(self) -> None:
        (version,) = (await self.conn.execute_fetchall("PRAGMA user_version"))[0]
        for script in sorted(SCHEMA_DIR.glob("[0-9][0-9][0-9]_*.sql")):
            number = int(script.name[:3])
            if number > version:
                await self.conn.executescript(
                    f"BEGIN;\n{script.read_text()}\nPRAGMA user_version={number};\nCOMMIT;")

    # -- generic access --------------------------------------------------------------------
    async def fetchall(self, sql: str, params: Iterable = ()) -> list[sqlite3.Row]:
        return list(await self.conn.execute_fetchall(sql, tuple(params)))

    async def fetchone(self, sql: str, params: Iterable = ()) -> sqlite3.Row | None:
        rows = await self.conn.execute_fetchall(sql, tuple(params))
        return rows[0] if rows else None

    async def write(self, statements: list[Statement]) -> None:
        """Commit the statements (and any pending cache rows) in one transaction."""
        async with self._lock, self._faults():
            batch, self._pending = self._pending + list(statements), []
            committing = list(self._pending_calls)
            await self._commit(batch)
            # Only now are the queued cache rows readable from the table: dropping them earlier
            # would let a lookup during the commit miss a call that was already made.
            for key in committing:
                self._pending_calls.pop(key, None)

    async def write_stream(self, batches: Iterable[list[Statement]]) -> None:
        """Commit lazily produced batches (a large import) in one transaction: all land, or none do
        (an exception raised while producing a batch rolls everything back). Within a batch, the
        statements are grouped by SQL, in order of first appearance, and each group goes through one
        executemany: a batch must not depend on interleaving (parents before children is kept)."""
        await self.flush()
        async with self._lock, self._faults():
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                for batch in batches:
                    groups: dict[str, list[tuple]] = {}
                    for sql, params in batch:
                        groups.setdefault(sql, []).append(params)
                    for sql, rows in groups.items():
                        await self.conn.executemany(sql, rows)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self.conn.execute("ROLLBACK")
                raise
            await self.conn.execute("COMMIT")

    def write_later(self, statements: list[Statement]) -> None:
        """Queue statements for the next commit (cache rows: losing them on a crash is harmless)."""
        self._pending.extend(statements)

    async def flush(self) -> None:
        if self._pending:
            await self.write([])

    async def maybe_flush(self) -> None:
        if len(self._pending) >= BATCH:
            await self.flush()

    @asynccontextmanager
    async def _faults(self):
        """Store faults raised inside become one-line errors naming the store."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            fault = store_fault(exc, self.path)
            if fault is None:
                raise
            raise fault from None

    async def _commit(self, batch: list[Statement]) -> None:
        if not batch:
            return
        await self.conn.execute("BEGIN IMMEDIATE")
        try:
            # Runs of the same statement (cache rows, turns) go as one executemany: one hop to
            # the database thread per run instead of one per row.
            for sql, group in itertools.groupby(batch, key=lambda st: st[0]):
                await self.conn.executemany(sql, [params for _, params in group])
        except BaseException:
            with anyio.CancelScope(shield=True):  # a cancelled write must still roll back
                await self.conn.execute("ROLLBACK")
            raise
        await self.conn.execute("COMMIT")

    # -- benchmarks ------------------------------------------------------------------------
    async def save_benchmark(self, bench: Benchmark, *, replace: bool = False) -> None:
        """All-or-nothing: the whole benchmark lands in one transaction, or nothing does."""
        exists = await self.fetchone("SELECT 1 FROM benchmarks WHERE name=?", (bench.name,))
        if exists and not replace:
            raise BadInput(f"benchmark {bench.name!r} already exists in the store", field="name")
        await self.write(self.benchmark_statements(bench))

    @staticmethod
    def benchmark_statements(bench: Benchmark) -> list[Statement]:
        """The rows of a benchmark (replacing one of the same name), for a caller's own transaction."""
        pool = None
        if bench.pool:
            pool = {c: [{"name": p.name, "axis": p.axis, "answer_space": list(p.answer_space), "source": p.source}
                        for p in entries] for c, entries in bench.pool.items()}
        st: list[Statement] = [("DELETE FROM benchmarks WHERE name=?", (bench.name,)),
                               ("INSERT INTO benchmarks(name, source, pool) VALUES (?,?,?)",
                                (bench.name, bench.source, dumps(pool) if pool else None))]
        for pos, user in enumerate(bench.users):
            st.append(("INSERT INTO users(bench, user_id, persona, position) VALUES (?,?,?,?)",
                       (bench.name, user.id, dumps(user.persona), pos)))
            for i, e in enumerate(user.bank):
                st.append(("INSERT INTO bank_entries VALUES (?,?,?,?,?,?,?,?)",
                           (bench.name, user.id, i, e.category, e.dimension, e.short, e.explanation, e.source)))
            for t in bench.tasks.get(user.id, ()):
                st.append(("INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?)",
                           (bench.name, user.id, t.index, t.text, t.target_category, t.target_dimension,
                            t.target_short, t.rationale, dumps(t.review))))
        return st

    async def list_benchmarks(self) -> list[dict]:
        rows = await self.fetchall(
            "SELECT b.name, (SELECT COUNT(*) FROM users u WHERE u.bench=b.name) AS users, "
            "(SELECT COUNT(*) FROM tasks t WHERE t.bench=b.name) AS tasks FROM benchmarks b ORDER BY b.name")
        return [dict(r) for r in rows]

    async def load_benchmark(self, name: str) -> Benchmark | None:
        row = await self.fetchone("SELECT * FROM benchmarks WHERE name=?", (name,))
        if row is None:
            return None
        bank: dict[str, list[BankEntry]] = {}
        for r in await self.fetchall("SELECT * FROM bank_entries WHERE bench=? ORDER BY user_id, position", (name,)):
            bank.setdefault(r["user_id"], []).append(
                BankEntry(r["category"], r["dimension"], r["short"], r["explanation"], r["source"]))
        tasks: dict[str, list[Task]] = {}
        for r in await self.fetchall("SELECT * FROM tasks WHERE bench=? ORDER BY user_id, idx", (name,)):
            tasks.setdefault(r["user_id"], []).append(
                Task(r["user_id"], r["idx"], r["text"], r["target_category"], r["target_dimension"],
                     r["target_short"], r["rationale"], loads(r["review"])))
        users = tuple(User(r["user_id"], loads(r["persona"]), tuple(bank.get(r["user_id"], ())))
                      for r in await self.fetchall("SELECT * FROM users WHERE bench=? ORDER BY position", (name,)))
        pool = None
        if row["pool"]:
            pool = {c: [PoolEntry(c, p["name"], p["axis"], tuple(p.get("answer_space", ())), p.get("source", ""))
                        for p in entries] for c, entries in loads(row["pool"]).items()}
        return Benchmark(name, users, {u: tuple(t) for u, t in tasks.items()}, pool, row["source"])

    # -- runs ------------------------------------------------------------------------------
    async def ensure_run(self, run: str, system: str, bench: str, *, origin: str = "rollout",
                         config: dict | None = None, prompt_hashes: dict | None = None) -> dict:
        row = await self.get_run(run)
        if row is not None:
            if row["system"] != system or row["bench"] != bench:
                raise BadInput(f"run {run!r} already exists for system {row['system']} on benchmark "
                               f"{row['bench']}; use --tag to start a new run", field="run")
            return row
        await self.write([("INSERT INTO runs(run, system, bench, origin, config, prompt_hashes) VALUES (?,?,?,?,?,?)",
                           (run, system, bench, origin, dumps(config or {}), dumps(prompt_hashes or {})))])
        return await self.get_run(run)

    def run_lock(self, run: str):
        """Hold `run` for this process while it writes the run's episodes: a second process asking
        for the same run gets RunBusy at once. An advisory lock on `<store>.locks/<run>.lock`, which
        the system drops when the holder exits, however it exits (a SIGKILLed rollout leaves no
        stale lock behind). The lock files stay: removing one could race with a process opening it."""
        if str(self.path) == ":memory:":
            return nullcontext()
        return _file_lock(self.path.with_name(self.path.name + ".locks") / f"{run}.lock", run, self.path)

    async def drop_empty_run(self, run: str) -> None:
        """Delete the run row if no episode was written under it: an empty row would pin the
        run's settings although nothing ran with them."""
        await self.write([("DELETE FROM runs WHERE run=? AND NOT EXISTS (SELECT 1 FROM episodes WHERE run=?)",
                           (run, run))])

    async def get_run(self, run: str) -> dict | None:
        row = await self.fetchone("SELECT * FROM runs WHERE run=?", (run,))
        if row is None:
            return None
        out = dict(row)
        out["config"], out["prompt_hashes"] = loads(row["config"]), loads(row["prompt_hashes"])
        return out

    async def list_runs(self) -> list[dict]:
        return [await self.get_run(r["run"]) for r in await self.fetchall("SELECT run FROM runs ORDER BY run")]

    # -- episodes and snapshots ------------------------------------------------------------
    def episode_statements(self, ep: Episode, final_preference: float | None) -> list[Statement]:
        st: list[Statement] = [
            ("INSERT INTO episodes VALUES (?,?,?,?,?,?,?,?)",
             (ep.run, ep.user_id, ep.task_index, ep.task, ep.end_reason, len(ep.turns), final_preference, ep.error))]
        for t in ep.turns:
            st.append(("INSERT INTO turns VALUES (?,?,?,?,?,?,?,?,?,?)",
                       (ep.run, ep.user_id, ep.task_index, t.index, t.assistant, t.feedback_type, t.user_text,
                        t.preference_score, dumps(t.per_pref), int(t.fallback))))
        return st

    @staticmethod
    def snapshot_statement(run: str, user_id: str, task_idx: int, state: Any, items: list[dict]) -> Statement:
        chars = [len(str(i.get("content", ""))) for i in items]
        return ("INSERT OR REPLACE INTO snapshots VALUES (?,?,?,?,?,?,?)",
                (run, user_id, task_idx, dumps(state), dumps(items), len(items),
                 sum(chars) / len(chars) if chars else 0.0))

    @staticmethod
    def call_use_statements(run: str, artifact: str, uses: Iterable[tuple[str, str, bool]]) -> list[Statement]:
        return [("INSERT OR IGNORE INTO call_uses VALUES (?,?,?,?,?)", (run, artifact, key, role, int(cached)))
                for role, key, cached in uses]

    async def episodes_done(self, run: str, user_id: str) -> set[int]:
        rows = await self.fetchall("SELECT task_idx FROM episodes WHERE run=? AND user_id=?", (run, user_id))
        return {r["task_idx"] for r in rows}

    async def load_episodes(self, run: str, user_id: str | None = None) -> list[Episode]:
        where, params = ("run=?", (run,)) if user_id is None else ("run=? AND user_id=?", (run, user_id))
        turns: dict[tuple, list[Turn]] = {}
        for r in await self.fetchall(f"SELECT * FROM turns WHERE {where} ORDER BY user_id, task_idx, turn", params):
            turns.setdefault((r["user_id"], r["task_idx"]), []).append(
                Turn(r["turn"], r["assistant"], r["feedback_type"], r["user_text"], r["preference_score"],
                     loads(r["per_pref"]), bool(r["fallback"])))
        return [Episode(r["run"], r["user_id"], r["task_idx"], r["task"], turns.get((r["user_id"], r["task_idx"]), []),
                        r["end_reason"], r["error"])
                for r in await self.fetchall(f"SELECT * FROM episodes WHERE {where} ORDER BY user_id, task_idx", params)]

    async def final_snapshot_tasks(self, run: str) -> dict[str, int]:
        """user -> the task index of the user's last memory snapshot in the run."""
        rows = await self.fetchall("SELECT user_id, MAX(task_idx) AS last FROM snapshots WHERE run=? GROUP BY user_id",
                                   (run,))
        return {r["user_id"]: r["last"] for r in rows}

    async def stale_reconstructions(self, run: str) -> list[sqlite3.Row]:
        """Per (variant, user, snapshot read): reconstructions of the run whose memory snapshot is not
        the user's final one (read while the rollout was still writing, or before it was resumed)."""
        return await self.fetchall(
            "SELECT r.variant, r.user_id, r.snapshot_task, s.last, COUNT(*) AS n FROM reconstructions r "
            "LEFT JOIN (SELECT user_id, MAX(task_idx) AS last FROM snapshots WHERE run=? GROUP BY user_id) s "
            "ON s.user_id = r.user_id WHERE r.run=? AND r.snapshot_task IS NOT s.last "
            "GROUP BY r.variant, r.user_id, r.snapshot_task ORDER BY r.variant, r.user_id", (run, run))

    @staticmethod
    def drop_stale_statements(run: str) -> list[Statement]:
        """Delete the stale reconstructions of a run and the attributions made from them."""
        stale = ("SELECT 1 FROM reconstructions r WHERE r.run=? AND r.snapshot_task IS NOT "
                 "(SELECT MAX(s.task_idx) FROM snapshots s WHERE s.run=r.run AND s.user_id=r.user_id)")
        return [(f"DELETE FROM attributions WHERE run=? AND EXISTS ({stale} AND r.mode=attributions.mode AND "
                 "r.k=attributions.k AND r.variant=attributions.variant AND r.user_id=attributions.user_id AND "
                 "r.dimension=attributions.dimension)", (run, run)),
                (f"DELETE FROM reconstructions WHERE run=? AND snapshot_task IS NOT "
                 "(SELECT MAX(s.task_idx) FROM snapshots s WHERE s.run=reconstructions.run AND "
                 "s.user_id=reconstructions.user_id)", (run,))]

    async def last_snapshot(self, run: str, user_id: str) -> dict | None:
        row = await self.fetchone("SELECT * FROM snapshots WHERE run=? AND user_id=? ORDER BY task_idx DESC LIMIT 1",
                                  (run, user_id))
        if row is None:
            return None
        return {"task_idx": row["task_idx"], "state": loads(row["state"]), "items": loads(row["items"]),
                "n_items": row["n_items"], "avg_chars": row["avg_chars"]}

    # -- reconstructions and attributions --------------------------------------------------
    @staticmethod
    def reconstruction_statement(r: Reconstruction) -> Statement:
        return (f"INSERT OR REPLACE INTO reconstructions({', '.join(RECONSTRUCTION_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(RECONSTRUCTION_COLUMNS))})",
                (r.run, r.mode, r.k, r.variant, r.user_id, r.category, r.dimension, r.explanation, r.ground_truth,
                 dumps(r.evidence), r.label, r.reason, r.score, r.judge_reason, r.status, r.error, r.snapshot_task))

    async def load_reconstructions(self, run: str, mode: str | None = None, *, k: int | None = None,
                                   variant: str = "default", user_id: str | None = None) -> list[Reconstruction]:
        sql, params = "SELECT * FROM reconstructions WHERE run=? AND variant=?", [run, variant]
        for col, val in (("mode", mode), ("k", k), ("user_id", user_id)):
            if val is not None:
                sql += f" AND {col}=?"
                params.append(val)
        rows = await self.fetchall(sql + " ORDER BY mode, k, user_id, category, dimension", params)
        return [Reconstruction(r["run"], r["mode"], r["k"], r["variant"], r["user_id"], r["category"], r["dimension"],
                               r["explanation"], r["ground_truth"], loads(r["evidence"]), r["label"], r["reason"],
                               r["score"], r["judge_reason"], r["status"], r["error"], r["snapshot_task"])
                for r in rows]

    @staticmethod
    def attribution_statement(a: Attribution) -> Statement:
        return ("INSERT OR REPLACE INTO attributions VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (a.run, a.mode, a.k, a.variant, a.user_id, a.category, a.dimension, a.label, a.score,
                 dumps(a.stages), a.ep_index, a.note))

    async def load_attributions(self, run: str, mode: str | None = None, *, variant: str = "default",
                                user_id: str | None = None) -> list[Attribution]:
        sql, params = "SELECT * FROM attributions WHERE run=? AND variant=?", [run, variant]
        for col, val in (("mode", mode), ("user_id", user_id)):
            if val is not None:
                sql += f" AND {col}=?"
                params.append(val)
        rows = await self.fetchall(sql + " ORDER BY mode, k, user_id, category, dimension", params)
        return [Attribution(r["run"], r["mode"], r["k"], r["variant"], r["user_id"], r["category"], r["dimension"],
                            r["label"], r["score"], loads(r["stages"]), r["ep_index"], r["note"]) for r in rows]

    # -- call cache ------------------------------------------------------------------------
    async def get_call(self, key: str):
        pending = self._pending_calls.get(key)
        if pending is not None:
            return pending
        if self._reader is not None:
            return self._reader.execute("SELECT * FROM calls WHERE key=?", (key,)).fetchone()
        return await self.fetchone("SELECT * FROM calls WHERE key=?", (key,))

    def put_call(self, *, key: str, role: str, model: str, request: str, response: str, ok: bool,
                 prompt_tokens: int = 0, completion_tokens: int = 0, cached_tokens: int = 0,
                 latency: float = 0.0, created: str = "", reasoning_tokens: int = 0) -> None:
        row = {"key": key, "role": role, "model": model, "request": request, "response": response, "ok": int(ok),
               "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
               "cached_tokens": cached_tokens, "latency": latency, "created": created,
               "reasoning_tokens": reasoning_tokens}
        self._pending_calls[key] = row
        self.write_later([(f"INSERT OR REPLACE INTO calls({', '.join(row)}) VALUES ({','.join('?' * len(row))})",
                           tuple(row.values()))])

    # -- embeddings ------------------------------------------------------------------------
    async def get_vectors(self, model: str, hashes: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for i in range(0, len(hashes), 500):
            chunk = hashes[i:i + 500]
            rows = await self.fetchall(
                f"SELECT text_hash, vector FROM embeddings WHERE model=? AND text_hash IN ({','.join('?' * len(chunk))})",
                [model, *chunk])
            out.update({r["text_hash"]: r["vector"] for r in rows})
        return out

    def put_vectors(self, model: str, vectors: dict[str, bytes]) -> None:
        self.write_later([("INSERT OR IGNORE INTO embeddings VALUES (?,?,?)", (model, h, v))
                          for h, v in vectors.items()])


@contextmanager
def _file_lock(path: Path, run: str, store_path: Path):
    try:
        path.parent.mkdir(exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise BadInput(f"cannot create the run lock {path.name} beside the store ({exc.strerror}); "
                       "the store's directory must be writable", file=str(store_path)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusy(f"run {run!r} is busy: another memaudit rollout is writing it into this store; "
                          "wait for it to finish (then rerun to resume), or use --tag for a separate run",
                          file=str(store_path)) from None
        yield
    finally:
        os.close(fd)  # closing drops the lock


@asynccontextmanager
async def open_store(path: str | Path):
    store = await Store.open(path)
    try:
        yield store
    finally:
        await store.close()
