"""Batch scoring's bookkeeping (db/012_batches.sql): the calls waiting for a batch result, each with
the exact body of its next attempt, and the batches they were sent in. What the rows mean lives in
memaudit/llm/batch.py."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from memaudit.store.rows import Row, Statement, dumps, loads, marks

if TYPE_CHECKING:
    from memaudit.store import Store

@dataclass(frozen=True)
class BatchRequestRow(Row):
    """A call waiting for a batch result: the exact body of its next attempt (memaudit/llm/batch.py)."""
    TABLE = "batch_requests"
    VERB = "INSERT OR IGNORE"  # a key already pending keeps its row (it may be in a batch)
    key: str
    role: str
    model: str
    request: str
    attempt: int
    body: str
    first_messages: str
    usage: str
    batch: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class BatchRow(Row):
    """A batch we sent: the provider's input file and batch ids, its state and counts."""
    TABLE = "batches"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"counts": dumps}
    name: str
    role: str
    endpoint: str
    input_file: str | None
    batch_id: str | None
    status: str
    collected: int
    requests: int
    counts: dict
    created: str


class Batches:
    def __init__(self, db: "Store"):
        self.db = db

    # -- pending requests ----------------------------------------------------------------
    @staticmethod
    def request_statement(row: dict) -> Statement:
        """A new pending request; a key already pending keeps its row (it may be in a batch)."""
        return BatchRequestRow(**{f.name: row.get(f.name) for f in fields(BatchRequestRow)}).statement()

    @staticmethod
    def next_attempt_statement(key: str, attempt: int, body: str, first_messages: str, usage: str) -> Statement:
        """The call's answer needs repair: its next attempt waits to be sent."""
        return ("UPDATE batch_requests SET attempt=?, body=?, first_messages=?, usage=?, batch=NULL, note=? "
                "WHERE key=?", (attempt, body, first_messages, usage, f"repair attempt {attempt}", key))

    @staticmethod
    def requeue_statement(key: str, note: str) -> Statement:
        return "UPDATE batch_requests SET batch=NULL, note=? WHERE key=?", (note, key)

    @staticmethod
    def done_statement(key: str) -> Statement:
        """The call's outcome is in the cache (or it will be asked again under another key)."""
        return "DELETE FROM batch_requests WHERE key=?", (key,)

    async def request(self, key: str):
        return await self.db.fetchone("SELECT * FROM batch_requests WHERE key=?", (key,))

    async def queued(self) -> list:
        """Requests waiting to be sent, by role then key (a stable order: the same files again)."""
        return await self.db.fetchall("SELECT * FROM batch_requests WHERE batch IS NULL ORDER BY role, key")

    async def in_batch(self, name: str) -> list:
        return await self.db.fetchall("SELECT * FROM batch_requests WHERE batch=? ORDER BY key", (name,))

    async def waiting(self, keys: list[str]) -> list:
        """(batch name or None, status, n) of the given pending keys."""
        out: dict = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            for r in await self.db.fetchall(
                    "SELECT r.batch, b.status, b.batch_id, COUNT(*) AS n FROM batch_requests r "
                    f"LEFT JOIN batches b ON b.name=r.batch WHERE r.key IN ({marks(chunk)}) GROUP BY r.batch",
                    chunk):
                name = r["batch"]
                prior = out.get(name, (r["status"], r["batch_id"], 0))
                out[name] = (prior[0], prior[1], prior[2] + r["n"])
        return [(name, status, batch_id, n) for name, (status, batch_id, n) in sorted(out.items(), key=str)]

    # -- batches -------------------------------------------------------------------------
    @staticmethod
    def batch_statement(*, name: str, role: str, endpoint: str, input_file: str | None, status: str,
                        requests: int, created: str) -> Statement:
        return BatchRow(name, role, endpoint, input_file, None, status, 0, requests, {}, created).statement()

    @staticmethod
    def assign_statement(name: str, keys: list[str]) -> Statement:
        return (f"UPDATE batch_requests SET batch=?, note='' WHERE key IN ({marks(keys)})", (name, *keys))

    @staticmethod
    def update_statement(name: str, **fields) -> Statement:
        if "counts" in fields:
            fields["counts"] = dumps(fields["counts"])
        sets = ", ".join(f"{column}=?" for column in fields)
        return f"UPDATE batches SET {sets} WHERE name=?", (*fields.values(), name)

    @staticmethod
    def drop_statements(name: str) -> list[Statement]:
        """An upload that never got a file: its requests wait to be sent again."""
        return [("UPDATE batch_requests SET batch=NULL WHERE batch=?", (name,)),
                ("DELETE FROM batches WHERE name=?", (name,))]

    async def batches(self, *, open_only: bool = False) -> list[dict]:
        sql = "SELECT * FROM batches" + (" WHERE collected=0" if open_only else "") + " ORDER BY created, name"
        return [{**dict(r), "counts": loads(r["counts"])} for r in await self.db.fetchall(sql)]

    async def count(self) -> int:
        return (await self.db.fetchone("SELECT COUNT(*) FROM batches"))[0]

    async def pending_counts(self) -> dict:
        """Requests per batch name still waiting for a result (None: waiting to be sent)."""
        return {r["batch"]: r["n"] for r in await self.db.fetchall(
            "SELECT batch, COUNT(*) AS n FROM batch_requests GROUP BY batch")}
