"""The Know/Act utilization stage (memaudit/utilization/): the benchmark's Act scenarios, one
pass per (run, k) with what it ran with, and one case per (run, k, user, bank entry)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from memaudit.store.rows import Statement, dumps, loads

if TYPE_CHECKING:
    from memaudit.store import Store


class Utilization:
    def __init__(self, db: "Store"):
        self.db = db

    @staticmethod
    def scenario_statement(bench: str, user_id: str, dimension: str, category: str, text: str, rationale: str,
                           review: dict) -> Statement:
        return ("INSERT OR REPLACE INTO act_scenarios(bench, user_id, dimension, category, text, rationale, review) "
                "VALUES (?,?,?,?,?,?,?)", (bench, user_id, dimension, category, text, rationale, dumps(review)))

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
        return ("INSERT OR REPLACE INTO utilization_passes(run, k, config) VALUES (?,?,?)", (run, k, dumps(config)))

    @staticmethod
    def case_statement(values: tuple) -> Statement:
        """`values` in the column order of act_cases (db/006_utilization.sql), JSON fields encoded."""
        return ("INSERT OR REPLACE INTO act_cases(run, k, user_id, category, dimension, know_score, know, scenario, "
                "answer, baseline, verdicts, act, oracle, oracle_steps, status, error) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", values)

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
