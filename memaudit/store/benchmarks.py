"""Benchmarks: users (persona), bank entries (the hidden state) and tasks."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from memaudit.canonical import dumps_native
from memaudit.errors import BadInput
from memaudit.store.rows import Row, Statement, dumps, loads
from memaudit.types import BankEntry, Benchmark, PoolEntry, Task, User, Version

if TYPE_CHECKING:
    from memaudit.store import Store


@dataclass(frozen=True)
class BenchmarkRow(Row):
    TABLE = "benchmarks"
    ENCODE = {"pool": lambda pool: dumps(pool) if pool else None}
    name: str
    source: str
    pool: dict | None = None


@dataclass(frozen=True)
class UserRow(Row):
    TABLE = "users"
    # native key order: the simulator is shown the persona as the benchmark wrote it
    ENCODE = {"persona": dumps_native}
    bench: str
    user_id: str
    persona: Any
    position: int


@dataclass(frozen=True)
class BankEntryRow(Row):
    TABLE = "bank_entries"
    bench: str
    user_id: str
    position: int
    category: str
    dimension: str
    short: str
    explanation: str
    source: str = ""


@dataclass(frozen=True)
class BankHistoryRow(Row):
    """One version of an evolving bank entry (types.Version), `version` its position in the history."""
    TABLE = "bank_history"
    bench: str
    user_id: str
    dimension: str
    version: int
    short: str
    explanation: str
    valid_from_task: int
    op: str


@dataclass(frozen=True)
class TaskRow(Row):
    TABLE = "tasks"
    ENCODE = {"review": dumps}
    bench: str
    user_id: str
    idx: int
    text: str
    target_category: str
    target_dimension: str
    target_short: str
    rationale: str = ""
    review: dict | None = field(default_factory=dict)


class Benchmarks:
    def __init__(self, db: "Store"):
        self.db = db

    async def save(self, bench: Benchmark, *, replace: bool = False) -> None:
        """All-or-nothing: the whole benchmark lands in one transaction, or nothing does."""
        exists = await self.db.fetchone("SELECT 1 FROM benchmarks WHERE name=?", (bench.name,))
        if exists and not replace:
            raise BadInput(f"benchmark {bench.name!r} already exists in the store", field="name")
        await self.db.write(self.statements(bench))

    @staticmethod
    def statements(bench: Benchmark) -> list[Statement]:
        """The rows of a benchmark (replacing one of the same name), for a caller's own transaction."""
        pool = None
        if bench.pool:
            pool = {c: [{"name": p.name, "axis": p.axis, "answer_space": list(p.answer_space), "source": p.source}
                        for p in entries] for c, entries in bench.pool.items()}
        st: list[Statement] = [("DELETE FROM benchmarks WHERE name=?", (bench.name,)),
                               BenchmarkRow(bench.name, bench.source, pool).statement()]
        for pos, user in enumerate(bench.users):
            st.append(UserRow(bench.name, user.id, user.persona, pos).statement())
            for i, e in enumerate(user.bank):
                st.append(BankEntryRow(bench.name, user.id, i, e.category, e.dimension, e.short, e.explanation,
                                       e.source).statement())
                st += [BankHistoryRow(bench.name, user.id, e.dimension, j, v.short, v.explanation, v.valid_from_task,
                                      v.op).statement() for j, v in enumerate(e.history)]
            for t in bench.tasks.get(user.id, ()):
                st.append(TaskRow(bench.name, user.id, t.index, t.text, t.target_category, t.target_dimension,
                                  t.target_short, t.rationale, t.review).statement())
        return st

    async def list(self) -> list[dict]:
        rows = await self.db.fetchall(
            "SELECT b.name, (SELECT COUNT(*) FROM users u WHERE u.bench=b.name) AS users, "
            "(SELECT COUNT(*) FROM tasks t WHERE t.bench=b.name) AS tasks FROM benchmarks b ORDER BY b.name")
        return [dict(r) for r in rows]

    async def load(self, name: str) -> Benchmark | None:
        bench = await self.load_header(name)
        if bench is None:
            return None
        bank: dict[str, list[BankEntry]] = {}
        histories = await self.histories(name)
        for r in await self._bank_rows(name):
            bank.setdefault(r["user_id"], []).append(_bank_entry(r, histories))
        tasks: dict[str, list[Task]] = {}
        for r in await self._task_rows(name):
            tasks.setdefault(r["user_id"], []).append(_task(r))
        users = tuple(User(r["user_id"], loads(r["persona"]), tuple(bank.get(r["user_id"], ())))
                      for r in await self._user_rows(name))
        return replace(bench, users=users, tasks={u: tuple(t) for u, t in tasks.items()})

    async def load_header(self, name: str) -> Benchmark | None:
        """The benchmark without its users (name, pool, source): with `load_user`, a study read one
        user at a time."""
        row = await self.db.fetchone("SELECT * FROM benchmarks WHERE name=?", (name,))
        if row is None:
            return None
        pool = None
        if row["pool"]:
            pool = {c: [PoolEntry(c, p["name"], p["axis"], tuple(p.get("answer_space", ())), p.get("source", ""))
                        for p in entries] for c, entries in loads(row["pool"]).items()}
        return Benchmark(name, (), {}, pool, row["source"])

    async def load_user(self, name: str, user_id: str) -> tuple[User, tuple[Task, ...]]:
        """One user of the benchmark (bank with its histories) and the user's tasks, as `load` has them."""
        row = await self.db.fetchone("SELECT * FROM users WHERE bench=? AND user_id=?", (name, user_id))
        histories = await self.histories(name, user_id)
        bank = await self.db.fetchall("SELECT * FROM bank_entries WHERE bench=? AND user_id=? ORDER BY position",
                                      (name, user_id))
        tasks = await self.db.fetchall("SELECT * FROM tasks WHERE bench=? AND user_id=? ORDER BY idx", (name, user_id))
        return (User(user_id, loads(row["persona"]), tuple(_bank_entry(r, histories) for r in bank)),
                tuple(_task(r) for r in tasks))

    async def histories(self, name: str, user_id: str | None = None) -> dict[tuple[str, str], tuple[Version, ...]]:
        """(user, dimension) -> the versions of every evolving entry of the benchmark (or of one user)."""
        where, params = ("bench=?", (name,)) if user_id is None else ("bench=? AND user_id=?", (name, user_id))
        found: dict[tuple[str, str], list[Version]] = {}
        for r in await self.db.fetchall(f"SELECT * FROM bank_history WHERE {where} ORDER BY user_id, dimension, "
                                        "version", params):
            found.setdefault((r["user_id"], r["dimension"]), []).append(
                Version(r["short"], r["valid_from_task"], r["op"], r["explanation"]))
        return {key: tuple(versions) for key, versions in found.items()}

    async def user_ids(self, name: str) -> list[str]:
        """The benchmark's user ids, in benchmark order."""
        return [r["user_id"] for r in await self._user_rows(name)]

    async def user_row(self, name: str, user_id: str) -> dict | None:
        """One user as plain rows for the report: persona decoded, bank entries and tasks as row dicts."""
        row = await self.db.fetchone("SELECT * FROM users WHERE bench=? AND user_id=?", (name, user_id))
        if row is None:
            return None
        bank = await self.db.fetchall("SELECT * FROM bank_entries WHERE bench=? AND user_id=? ORDER BY position",
                                      (name, user_id))
        tasks = await self.db.fetchall("SELECT * FROM tasks WHERE bench=? AND user_id=? ORDER BY idx", (name, user_id))
        return {"user_id": user_id, "persona": loads(row["persona"]), "bank": [dict(r) for r in bank],
                "tasks": [dict(r) for r in tasks]}

    async def most_tasks(self, name: str) -> int | None:
        """The largest number of tasks any user of the benchmark has (None without tasks)."""
        row = await self.db.fetchone(
            "SELECT MAX(n) AS n FROM (SELECT COUNT(*) AS n FROM tasks WHERE bench=? GROUP BY user_id)", (name,))
        return row["n"]

    async def _bank_rows(self, name: str):
        return await self.db.fetchall("SELECT * FROM bank_entries WHERE bench=? ORDER BY user_id, position", (name,))

    async def _task_rows(self, name: str):
        return await self.db.fetchall("SELECT * FROM tasks WHERE bench=? ORDER BY user_id, idx", (name,))

    async def _user_rows(self, name: str):
        return await self.db.fetchall("SELECT * FROM users WHERE bench=? ORDER BY position", (name,))


def _bank_entry(r, histories: dict) -> BankEntry:
    return BankEntry(r["category"], r["dimension"], r["short"], r["explanation"], r["source"],
                     histories.get((r["user_id"], r["dimension"]), ()))


def _task(r) -> Task:
    return Task(r["user_id"], r["idx"], r["text"], r["target_category"], r["target_dimension"], r["target_short"],
                r["rationale"], loads(r["review"]))
