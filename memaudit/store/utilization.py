"""The Know/Act utilization stage (memaudit/utilization/): the benchmark's Act scenarios, one
pass per (run, k) with what it ran with, and one case per (run, k, user, bank entry)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memaudit.store.rows import Row, Statement, dumps, loads, optional_int

if TYPE_CHECKING:
    from memaudit.store import Store


@dataclass(frozen=True)
class ActScenarioRow(Row):
    TABLE = "act_scenarios"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"review": dumps}
    bench: str
    user_id: str
    dimension: str
    category: str
    text: str
    rationale: str
    review: dict


@dataclass(frozen=True)
class UtilizationPassRow(Row):
    TABLE = "utilization_passes"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"config": dumps}
    run: str
    k: int
    config: dict


@dataclass
class ActCase(Row):
    """One Know/Act case of a target, as memaudit/utilization/act.py fills it in and stores it: Know
    from the recovery score, the answers with and without memory, the pairwise verdicts, and why a
    known entry was not used (the oracle steps)."""
    TABLE = "act_cases"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"know": optional_int, "verdicts": dumps, "oracle_steps": dumps}
    run: str
    k: int
    user_id: str
    category: str
    dimension: str
    know_score: float | None
    know: bool | None
    scenario: str
    answer: str | None = None
    baseline: str | None = None
    verdicts: list = field(default_factory=list)
    act: str | None = None
    oracle: str | None = None
    oracle_steps: list = field(default_factory=list)
    status: str = "failed"
    error: str | None = None


class Utilization:
    def __init__(self, db: "Store"):
        self.db = db

    @staticmethod
    def scenario_statement(bench: str, user_id: str, dimension: str, category: str, text: str, rationale: str,
                           review: dict) -> Statement:
        return ActScenarioRow(bench, user_id, dimension, category, text, rationale, review).statement()

    async def scenario_rows(self, bench: str) -> list[dict]:
        """Every stored Act scenario of the benchmark, review decoded, by user and dimension."""
        return [{**dict(r), "review": loads(r["review"])} for r in await self.db.fetchall(
            "SELECT * FROM act_scenarios WHERE bench=? ORDER BY user_id, dimension", (bench,))]

    async def pass_config(self, run: str, k: int) -> dict | None:
        row = await self.db.fetchone("SELECT config FROM utilization_passes WHERE run=? AND k=?", (run, k))
        return None if row is None else loads(row["config"])

    async def passes(self, run: str) -> list[tuple[int, dict]]:
        """(k, config) of every pass of the run, by k."""
        return [(r["k"], loads(r["config"])) for r in await self.db.fetchall(
            "SELECT k, config FROM utilization_passes WHERE run=? ORDER BY k", (run,))]

    @staticmethod
    def pass_statement(run: str, k: int, config: dict) -> Statement:
        return UtilizationPassRow(run, k, config).statement()

    async def case_keys(self, run: str, k: int) -> set[tuple[str, str]]:
        """(user, dimension) of every stored case: what a resumed pass skips."""
        return {(r["user_id"], r["dimension"]) for r in await self.db.fetchall(
            "SELECT user_id, dimension FROM act_cases WHERE run=? AND k=?", (run, k))}

    async def cases(self, run: str, k: int) -> list[dict]:
        """Every case of one pass, JSON fields decoded, by user, category and dimension."""
        rows = await self.db.fetchall(
            "SELECT * FROM act_cases WHERE run=? AND k=? ORDER BY user_id, category, dimension", (run, k))
        return [{**dict(r), "know": None if r["know"] is None else bool(r["know"]), "verdicts": loads(r["verdicts"]),
                 "oracle_steps": loads(r["oracle_steps"])} for r in rows]
