"""The call cache (every model call, content-addressed), which artifact used which call, and the
embedding vectors. `Calls` is the client's CallCache and `Vectors` the embedder's VectorCache."""
from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from memaudit.store.faults import faults, not_a_store
from memaudit.store.rows import Row, Statement, loads

if TYPE_CHECKING:
    from memaudit.store import Store

CALL_COLUMNS = ("key, role, model, request, response, ok, prompt_tokens, completion_tokens, cached_tokens, "
                "latency, created, reasoning_tokens")


# The content-addressed union of a store attached as `src` into this one (`cache merge`, and
# `memaudit merge` of study shards, which first refuses keys whose responses differ).
CACHE_UNION = (
    f"INSERT INTO calls({CALL_COLUMNS}) SELECT {CALL_COLUMNS} FROM src.calls WHERE true "
    "ON CONFLICT(key) DO UPDATE SET response=excluded.response, ok=excluded.ok, "
    "prompt_tokens=excluded.prompt_tokens, completion_tokens=excluded.completion_tokens, "
    "cached_tokens=excluded.cached_tokens, latency=excluded.latency, created=excluded.created, "
    "reasoning_tokens=excluded.reasoning_tokens "
    "WHERE calls.ok = 0 AND excluded.ok = 1",
    "INSERT OR IGNORE INTO embeddings(model, text_hash, vector) SELECT model, text_hash, vector FROM src.embeddings",
    "INSERT OR IGNORE INTO param_refusals(model, backend, param) SELECT model, backend, param FROM src.param_refusals",
)
CACHE_TABLES = ("calls", "embeddings", "param_refusals")


@dataclass(frozen=True)
class CallRow(Row):
    """A recorded call: `request` and `response` as the client keyed and recorded them (JSON text)."""
    TABLE = "calls"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"ok": int}
    key: str
    role: str
    model: str
    request: str
    response: str
    ok: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    latency: float = 0.0
    created: str = ""
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class EmbeddingRow(Row):
    """A text's vector under one embedding model (float32 bytes), keyed by the text's hash."""
    TABLE = "embeddings"
    VERB = "INSERT OR IGNORE"
    model: str
    text_hash: str
    vector: bytes


@dataclass(frozen=True)
class ParamRefusalRow(Row):
    """A request parameter a model's server refused (the client stops sending it)."""
    TABLE = "param_refusals"
    VERB = "INSERT OR IGNORE"
    model: str
    backend: str
    param: str


@dataclass(frozen=True)
class CallUseRow(Row):
    """`artifact` of `run` used the call `key` (answered from the cache or not)."""
    TABLE = "call_uses"
    VERB = "INSERT OR IGNORE"
    ENCODE = {"from_cache": int}
    run: str
    artifact: str
    key: str
    role: str
    from_cache: bool


class Calls:
    def __init__(self, db: "Store"):
        self.db = db

    # -- the cache (CallCache) -------------------------------------------------------------
    async def get_call(self, key: str):
        """The recorded outcome of a call (`ok`, `response`), or None. The request, often the
        largest column, is not read: the key already stands for it."""
        db = self.db
        pending = db._pending_calls.get(key)
        if pending is not None:
            return pending
        if db._reader is not None:
            with faults(db.path):
                return db._reader.execute("SELECT ok, response FROM calls WHERE key=?", (key,)).fetchone()
        return await db.fetchone("SELECT ok, response FROM calls WHERE key=?", (key,))

    def put_call(self, *, key: str, role: str, model: str, request: str, response: str, ok: bool,
                 prompt_tokens: int = 0, completion_tokens: int = 0, cached_tokens: int = 0,
                 latency: float = 0.0, created: str = "", reasoning_tokens: int = 0) -> None:
        row = CallRow(key, role, model, request, response, ok, prompt_tokens, completion_tokens, cached_tokens,
                      latency, created, reasoning_tokens)
        self.db._pending_calls[key] = row.as_dict()
        self.db.write_later([row.statement()])

    async def maybe_flush(self) -> None:
        await self.db.maybe_flush()

    # -- parameters a model refused (param_refusals) ---------------------------------------
    async def refused_params(self) -> list[tuple[str, str, str]]:
        """(model, backend, param) of every parameter a model refused with a 400."""
        return [(r["model"], r["backend"], r["param"])
                for r in await self.db.fetchall("SELECT model, backend, param FROM param_refusals")]

    async def record_refusal(self, model: str, backend: str, param: str) -> None:
        await self.db.write([ParamRefusalRow(model, backend, param).statement()])

    # -- uses ------------------------------------------------------------------------------
    @staticmethod
    def use_statements(run: str, artifact: str, uses: Iterable[tuple[str, str, bool]]) -> list[Statement]:
        """Rows saying that `artifact` of `run` used these (role, key, from_cache) calls."""
        return [CallUseRow(run, artifact, key, role, cached).statement() for role, key, cached in uses]

    async def artifact_tokens(self, run: str, artifact: str) -> int:
        """Prompt plus completion tokens of the calls one artifact used."""
        row = await self.db.fetchone(
            "SELECT COALESCE(SUM(c.prompt_tokens + c.completion_tokens), 0) AS n FROM call_uses u "
            "JOIN calls c ON c.key = u.key WHERE u.run=? AND u.artifact=?", (run, artifact))
        return row["n"]

    async def usage_by_role(self, run: str):
        """Per call role of the run: distinct calls and their prompt, completion, cached and reasoning tokens."""
        return await self.db.fetchall(
            "SELECT u.role, COUNT(*) AS calls, SUM(c.prompt_tokens) AS prompt, SUM(c.completion_tokens) AS completion, "
            "SUM(c.cached_tokens) AS cached, SUM(c.reasoning_tokens) AS reasoning "
            "FROM (SELECT DISTINCT key, role FROM call_uses WHERE run=?) u "
            "JOIN calls c ON c.key=u.key GROUP BY u.role ORDER BY u.role", (run,))

    async def memory_usage_by_user(self, run: str):
        """Per user and call role of the run's episodes (artifacts `episode:<user>:<task>`): the
        distinct calls the user's episodes used and their prompt plus completion tokens."""
        return await self.db.fetchall(
            "SELECT d.user_id, d.role, COUNT(*) AS calls, SUM(c.prompt_tokens + c.completion_tokens) AS tokens "
            "FROM (SELECT DISTINCT substr(artifact, 9, instr(substr(artifact, 9), ':') - 1) AS user_id, key, role "
            "      FROM call_uses WHERE run=? AND artifact LIKE 'episode:%') d "
            "JOIN calls c ON c.key = d.key GROUP BY d.user_id, d.role ORDER BY d.user_id, d.role", (run,))

    async def run_call_usage(self, run: str):
        """Each distinct call the run's artifacts used, once: its key, role, model, tokens, the
        first artifact (by name) that used it, whether it failed (`error_kind`, else None) and why
        its tokens are unknown when the answer said (`usage_unknown`, else None)."""
        return await self.db.fetchall(
            "SELECT u.key, u.role, u.artifact, c.model, c.prompt_tokens, c.cached_tokens, c.completion_tokens, "
            "c.reasoning_tokens, CASE WHEN c.ok THEN NULL ELSE json_extract(c.response, '$.error_kind') END "
            "AS error_kind, json_extract(c.response, '$.usage.unknown') AS usage_unknown "
            "FROM (SELECT key, MIN(role) AS role, MIN(artifact) AS artifact FROM call_uses "
            "WHERE run=? GROUP BY key) u JOIN calls c ON c.key = u.key ORDER BY u.key", (run,))

    async def models_by_role(self, run: str) -> list[tuple[str, str]]:
        """(call role, model) of every distinct pair among the calls the run's artifacts used."""
        rows = await self.db.fetchall(
            "SELECT DISTINCT c.role, c.model FROM call_uses u JOIN calls c ON c.key = u.key WHERE u.run=? "
            "ORDER BY c.role, c.model", (run,))
        return [(r["role"], r["model"]) for r in rows]

    # -- looking after the cache -----------------------------------------------------------
    async def stored_by_role(self):
        """Per role: calls stored, ok, bytes of request and response, prompt and completion tokens."""
        return await self.db.fetchall(
            "SELECT role, COUNT(*) AS stored, SUM(ok) AS ok, "
            "SUM(LENGTH(CAST(request AS BLOB)) + LENGTH(CAST(response AS BLOB))) AS bytes, "
            "SUM(prompt_tokens) AS prompt_tokens, SUM(completion_tokens) AS completion_tokens "
            "FROM calls GROUP BY role")

    async def uses_by_role(self):
        """Per role: uses answered from the cache (hits) and made fresh (misses)."""
        return await self.db.fetchall(
            "SELECT role, SUM(from_cache) AS hits, SUM(1 - from_cache) AS misses FROM call_uses GROUP BY role")

    async def counts(self) -> tuple[int, int, int]:
        """(calls, recorded failures, embedding vectors) in the store."""
        row = await self.db.fetchone("SELECT (SELECT COUNT(*) FROM calls), (SELECT COUNT(*) FROM calls WHERE ok=0), "
                                     "(SELECT COUNT(*) FROM embeddings)")
        return row[0], row[1], row[2]

    async def merge_from(self, source: Path) -> None:
        """Add the source store's calls, embeddings and refused parameters in one transaction. A
        stored answer is never replaced, except a recorded failure by a successful answer."""
        with faults(self.db.path):
            await self.db.conn.execute("ATTACH DATABASE ? AS src", (str(source),))
            try:
                await self.db.write([(sql, ()) for sql in CACHE_UNION])
            finally:
                await self.db.conn.execute("DETACH DATABASE src")

    # -- tracing (`memaudit calls`) --------------------------------------------------------
    async def find(self, *, run: str | None = None, role: str | None = None, artifact: str | None = None,
                   failed: bool = False, limit: int | None = None) -> list[dict]:
        """Recorded calls, oldest first, each with its request and response decoded. `run` and
        `artifact` (a GLOB, like `role`) keep the calls those artifacts used; `from_cache` says
        whether every such use was answered from the cache (None for a call no artifact used)."""
        where, params = [], []
        if run is not None:
            where.append("u.run=?")
            params.append(run)
        if artifact is not None:
            where.append("u.artifact GLOB ?")
            params.append(artifact)
        if role is not None:
            where.append("c.role GLOB ?")
            params.append(role)
        if failed:
            where.append("c.ok=0")
        sql = ("SELECT c.*, MIN(u.from_cache) AS from_cache FROM calls c LEFT JOIN call_uses u ON u.key=c.key"
               + (" WHERE " + " AND ".join(where) if where else "") + " GROUP BY c.key ORDER BY c.created, c.key")
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        await self.db.flush()
        return [{**dict(r), "request": loads(r["request"]), "response": loads(r["response"])}
                for r in await self.db.fetchall(sql, params)]


class Vectors:
    def __init__(self, db: "Store"):
        self.db = db

    async def by_model(self) -> list[dict]:
        """Per embedding model: the vectors cached and their bytes (embeddings are not calls)."""
        await self.db.flush()
        rows = await self.db.fetchall("SELECT model, COUNT(*) AS vectors, SUM(LENGTH(vector)) AS bytes "
                                      "FROM embeddings GROUP BY model ORDER BY model")
        return [dict(r) for r in rows]

    async def get_vectors(self, model: str, hashes: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for i in range(0, len(hashes), 500):
            chunk = hashes[i:i + 500]
            rows = await self.db.fetchall(
                f"SELECT text_hash, vector FROM embeddings WHERE model=? AND text_hash IN ({','.join('?' * len(chunk))})",
                [model, *chunk])
            out.update({r["text_hash"]: r["vector"] for r in rows})
        return out

    def put_vectors(self, model: str, vectors: dict[str, bytes]) -> None:
        self.db.write_later([EmbeddingRow(model, h, v).statement() for h, v in vectors.items()])


def store_tables(path: Path) -> set[str]:
    """Names of the tables in an SQLite file, read-only (checking a store before merging it); a file
    that is no SQLite database is a StoreError naming it."""
    with not_a_store(path), closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
