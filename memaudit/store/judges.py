"""Judge panels and their checks (db/009_judges.sql): every panel judge's verdict per target,
judge-check passes with their control answers and verdicts, and human grades."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memaudit.store.rows import Row, Statement, dumps, loads, marks

if TYPE_CHECKING:
    from memaudit.store import Store
    from memaudit.types import Reconstruction

TARGET = ("run", "mode", "k", "variant", "user_id", "dimension")
CONTROL = ("bench", "user_id", "dimension", "kind")
# Tables of judge-check and their keys (replay compares them row by row).
CONTROL_TABLES = {"judge_checks": ("bench", "seed", "per_category"), "control_answers": CONTROL,
                  "control_verdicts": (*CONTROL, "judge", "repeat")}


@dataclass(frozen=True)
class JudgeVerdictRow(Row):
    """One panel judge's verdict (one repeat) on a scored target."""
    TABLE = "judge_verdicts"
    VERB = "INSERT OR REPLACE"
    run: str
    mode: str
    k: int
    variant: str
    user_id: str
    dimension: str
    judge: str
    repeat: int
    score: float | None
    reason: str | None
    status: str
    error: str | None


@dataclass(frozen=True)
class JudgeCheckRow(Row):
    TABLE = "judge_checks"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"config": dumps}
    bench: str
    seed: int
    per_category: int
    config: dict


@dataclass(frozen=True)
class ControlAnswerRow(Row):
    """A control answer of judge-check (the truth, a paraphrase, another user's value …)."""
    TABLE = "control_answers"
    VERB = "INSERT OR REPLACE"
    bench: str
    user_id: str
    dimension: str
    kind: str
    category: str
    text: str | None
    source: str | None
    error: str | None


@dataclass(frozen=True)
class ControlVerdictRow(Row):
    TABLE = "control_verdicts"
    VERB = "INSERT OR REPLACE"
    bench: str
    user_id: str
    dimension: str
    kind: str
    judge: str
    repeat: int
    score: float | None
    reason: str | None
    status: str
    error: str | None


@dataclass(frozen=True)
class HumanGradeRow(Row):
    TABLE = "human_grades"
    VERB = "INSERT OR REPLACE"
    grader: str
    run: str
    mode: str
    k: int
    user_id: str
    dimension: str
    score: float


class Judges:
    def __init__(self, db: "Store"):
        self.db = db

    def targets(self, runs: list[str], variant: str):
        """Key, category, score, status and label of every reconstruction of the runs (no evidence):
        what B per judge, agreement and the audit sample are computed from. An async iterator."""
        return self.db.iterate(
            "SELECT run, mode, k, user_id, category, dimension, score, status, label FROM reconstructions "
            f"WHERE variant=? AND run IN ({marks(runs)}) ORDER BY run, mode, k, user_id, dimension", [variant, *runs])

    # -- panel verdicts of scored targets ----------------------------------------------------
    @staticmethod
    def verdict_statements(r: "Reconstruction") -> list[Statement]:
        key = (r.run, r.mode, r.k, r.variant, r.user_id, r.dimension)
        return [JudgeVerdictRow(*key, v.judge, v.repeat, v.score, v.reason, v.status, v.error).statement()
                for v in r.verdicts]

    async def verdicts(self, runs: list[str], variant: str):
        """Every verdict of a target still stored (a rescored target's old verdicts are replaced, a
        deleted one's are ignored), with the target's category, in key order."""
        on = " AND ".join(f"v.{c}=r.{c}" for c in TARGET)
        return await self.db.fetchall(
            f"SELECT v.*, r.category FROM judge_verdicts v JOIN reconstructions r ON {on} "
            f"WHERE v.variant=? AND v.run IN ({marks(runs)}) "
            "ORDER BY v.run, v.mode, v.k, v.user_id, v.dimension, v.judge, v.repeat", [variant, *runs])

    # -- judge-check ---------------------------------------------------------------------------
    @staticmethod
    def check_statement(bench: str, seed: int, per_category: int, config: dict) -> Statement:
        return JudgeCheckRow(bench, seed, per_category, config).statement()

    async def checks(self, benches: list[str] | None = None) -> list[dict]:
        """Every judge-check pass (of the benches), in the order they were first recorded."""
        where = "" if benches is None else f" WHERE bench IN ({marks(benches)})"
        rows = await self.db.fetchall(f"SELECT * FROM judge_checks{where} ORDER BY rowid", benches or [])
        return [{**dict(r), "config": loads(r["config"])} for r in rows]

    @staticmethod
    def control_statement(bench: str, user_id: str, dimension: str, kind: str, category: str, text: str | None,
                          source: str | None, error: str | None) -> Statement:
        return ControlAnswerRow(bench, user_id, dimension, kind, category, text, source, error).statement()

    async def controls(self, bench: str) -> dict[tuple, dict]:
        """(user, dimension, kind) -> the stored control answer row."""
        rows = await self.db.fetchall("SELECT * FROM control_answers WHERE bench=?", (bench,))
        return {(r["user_id"], r["dimension"], r["kind"]): dict(r) for r in rows}

    @staticmethod
    def control_verdict_statement(bench: str, user_id: str, dimension: str, kind: str, v) -> Statement:
        return ControlVerdictRow(bench, user_id, dimension, kind, v.judge, v.repeat, v.score, v.reason, v.status,
                                 v.error).statement()

    async def control_verdicts(self, benches: list[str]):
        """Every control verdict of the benches with the answer's category, in key order."""
        on = " AND ".join(f"v.{c}=a.{c}" for c in CONTROL)
        return await self.db.fetchall(
            f"SELECT v.*, a.category FROM control_verdicts v JOIN control_answers a ON {on} "
            f"WHERE v.bench IN ({marks(benches)}) "
            "ORDER BY v.bench, v.user_id, v.dimension, v.kind, v.judge, v.repeat", benches)

    async def control_rows(self, benches: list[str]) -> dict[str, list]:
        """For replay: every CONTROL_TABLES row of the benches, in key order."""
        return {table: await self.db.fetchall(
            f"SELECT * FROM {table} WHERE bench IN ({marks(benches)}) ORDER BY {', '.join(key)}", benches)
            for table, key in CONTROL_TABLES.items()}

    # -- human grades --------------------------------------------------------------------------
    @staticmethod
    def grade_statement(grader: str, target: tuple, score: float) -> Statement:
        """`target` = (run, mode, k, user_id, dimension)."""
        return HumanGradeRow(grader, *target, score).statement()

    async def grades(self, runs: list[str]):
        return await self.db.fetchall(
            f"SELECT * FROM human_grades WHERE run IN ({marks(runs)}) "
            "ORDER BY run, mode, k, user_id, dimension, grader", runs)
