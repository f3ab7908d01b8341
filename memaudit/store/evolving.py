"""Evolving targets: the yes/no criteria judged on reconstructions and on final stores."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memaudit.store.rows import Row, Statement, marks, optional_int
from memaudit.types import EvolvingJudgment

if TYPE_CHECKING:
    from memaudit.store import Store

KEY = ("run", "mode", "k", "variant", "user_id", "dimension", "criterion", "version")


@dataclass
class EvolvingJudgmentRow(EvolvingJudgment, Row):
    TABLE = "evolving_judgments"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"verdict": optional_int}


class Evolving:
    def __init__(self, db: "Store"):
        self.db = db

    @staticmethod
    def statement(j: EvolvingJudgment) -> Statement:
        return EvolvingJudgmentRow.of(j).statement()

    @staticmethod
    def drop_stale_statements(run: str) -> list[Statement]:
        """Judgments of a memory that is no longer the user's final one are judged again."""
        return [("DELETE FROM evolving_judgments WHERE run=? AND snapshot_task IS NOT "
                 "(SELECT MAX(s.task_idx) FROM snapshots s WHERE s.run=evolving_judgments.run AND "
                 "s.user_id=evolving_judgments.user_id)", (run,))]

    @staticmethod
    def delete_statements(run: str, variant: str, keys) -> list[Statement]:
        """Delete the judgments of these (mode, k, user, dimension, criterion, version) keys."""
        where = " AND ".join(f"{c}=?" for c in KEY[1:3] + KEY[4:])
        return [(f"DELETE FROM evolving_judgments WHERE run=? AND variant=? AND {where}",
                 (run, variant, *key)) for key in keys]

    async def keys(self, run: str, variant: str) -> set[tuple]:
        """(mode, k, user, dimension, criterion, version) of every stored judgment."""
        rows = await self.db.fetchall("SELECT mode, k, user_id, dimension, criterion, version FROM "
                                      "evolving_judgments WHERE run=? AND variant=?", (run, variant))
        return {tuple(r) for r in rows}

    async def load(self, runs: list[str], variant: str) -> list[EvolvingJudgment]:
        rows = await self.db.fetchall(f"SELECT * FROM evolving_judgments WHERE run IN ({marks(runs)}) AND variant=? "
                                      f"ORDER BY {', '.join(KEY)}", [*runs, variant])
        return [EvolvingJudgment(r["run"], r["mode"], r["k"], r["variant"], r["user_id"], r["category"],
                                 r["dimension"], r["criterion"], r["version"],
                                 None if r["verdict"] is None else bool(r["verdict"]), r["reason"], r["status"],
                                 r["error"], r["snapshot_task"]) for r in rows]
