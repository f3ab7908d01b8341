"""Attributions (the label of each target below the recovery threshold) and the Stage-0 oracle
verdicts they share across systems and modes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memaudit.store.rows import Row, Statement, dumps, loads, marks, optional_int
from memaudit.types import DEFAULT_VARIANT, Attribution

if TYPE_CHECKING:
    from memaudit.store import Store


@dataclass
class AttributionRow(Attribution, Row):
    TABLE = "attributions"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"stages": dumps}


@dataclass(frozen=True)
class OracleRow(Row):
    """A Stage-0 verdict on a task (`oracle`: made by memaudit; `imported_oracle`: from a release)."""
    TABLE = "oracle"
    VERB = "INSERT OR IGNORE"  # the first verdict recorded for a key stays
    ENCODE = {"can_invite": optional_int}
    bench: str
    user_id: str
    dimension: str
    task_hash: str
    can_invite: bool | None
    reason: str | None


@dataclass(frozen=True)
class ImportedOracleRow(OracleRow):
    TABLE = "imported_oracle"
    VERB = "INSERT OR REPLACE"


@dataclass(frozen=True)
class AttributionPassRow(Row):
    TABLE = "attribution_passes"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"config": dumps}
    run: str
    mode: str
    k: int
    variant: str
    config: dict


class Attributions:
    def __init__(self, db: "Store"):
        self.db = db

    @staticmethod
    def statement(a: Attribution, *, replace: bool = True) -> Statement:
        """`replace=False` makes a second row for the same key an IntegrityError (an import's damage)."""
        return AttributionRow.of(a).statement(None if replace else "INSERT")

    async def load(self, run: str, mode: str | None = None, *, variant: str = DEFAULT_VARIANT,
                   user_id: str | None = None, label: str | None = None) -> list[Attribution]:
        sql, params = "SELECT * FROM attributions WHERE run=? AND variant=?", [run, variant]
        for col, val in (("mode", mode), ("user_id", user_id), ("label", label)):
            if val is not None:
                sql += f" AND {col}=?"
                params.append(val)
        rows = await self.db.fetchall(sql + " ORDER BY mode, k, user_id, category, dimension", params)
        return [Attribution(r["run"], r["mode"], r["k"], r["variant"], r["user_id"], r["category"], r["dimension"],
                            r["label"], r["score"], loads(r["stages"]), r["ep_index"], r["note"]) for r in rows]

    async def keys(self, run: str, variant: str) -> set[tuple]:
        """(mode, k, user, dimension) of every stored attribution: what a resumed pass skips."""
        return {(r["mode"], r["k"], r["user_id"], r["dimension"]) for r in await self.db.fetchall(
            "SELECT mode, k, user_id, dimension FROM attributions WHERE run=? AND variant=?", (run, variant))}

    async def label_counts(self, run: str, variant: str) -> list[dict]:
        """(mode, k, label, n) rows, sorted."""
        return [dict(r) for r in await self.db.fetchall(
            "SELECT mode, k, label, COUNT(*) AS n FROM attributions WHERE run=? AND variant=? "
            "GROUP BY mode, k, label ORDER BY mode, k, label", (run, variant))]

    async def modes(self, run: str) -> list[str]:
        """Access modes the run has attributions for, sorted."""
        return [r["mode"] for r in await self.db.fetchall(
            "SELECT DISTINCT mode FROM attributions WHERE run=? ORDER BY mode", (run,))]

    def pass_labels(self, run: str, mode: str, k: int, variant: str):
        """(user_id, dimension, label) of every attribution of one pass, as an async iterator."""
        return self.db.iterate(
            "SELECT user_id, dimension, label FROM attributions WHERE run=? AND mode=? AND k=? AND variant=?",
            (run, mode, k, variant))

    async def user_rows(self, runs: list[str], user_id: str, variant: str) -> dict:
        """(run, mode, k, dimension) -> the attribution row of one user, stages decoded."""
        return {(r["run"], r["mode"], r["k"], r["dimension"]): {**dict(r), "stages": loads(r["stages"])}
                for r in await self.db.fetchall(
                    f"SELECT * FROM attributions WHERE variant=? AND user_id=? AND run IN ({marks(runs)})",
                    [variant, user_id, *runs])}

    # -- oracle verdicts -------------------------------------------------------------------
    @staticmethod
    def oracle_statement(bench: str, user_id: str, dimension: str, task_hash: str, can_invite: bool | None,
                         reason: str, *, replace: bool = False) -> Statement:
        """A verdict row; by default the first verdict recorded for a key stays."""
        row = OracleRow(bench, user_id, dimension, task_hash, can_invite, reason)
        return row.statement("INSERT OR REPLACE" if replace else None)

    async def oracle(self, bench: str, user_id: str, dimension: str, task_hash: str) -> dict | None:
        """{can_invite (bool or None), reason} of a recorded verdict, or None."""
        row = await self.db.fetchone("SELECT can_invite, reason FROM oracle WHERE bench=? AND user_id=? AND "
                                     "dimension=? AND task_hash=?", (bench, user_id, dimension, task_hash))
        if row is None:
            return None
        return {"can_invite": None if row["can_invite"] is None else bool(row["can_invite"]), "reason": row["reason"]}

    @staticmethod
    def imported_oracle_statement(bench: str, user_id: str, dimension: str, task_hash: str,
                                  can_invite: bool | None, reason: str) -> Statement:
        return ImportedOracleRow(bench, user_id, dimension, task_hash, can_invite, reason).statement()

    async def imported_oracle(self, bench: str, user_id: str, dimension: str, task_hash: str) -> dict | None:
        """{can_invite, reason} of a verdict imported with a release (None: none, or unparsable)."""
        row = await self.db.fetchone("SELECT can_invite, reason FROM imported_oracle WHERE bench=? AND user_id=? "
                                     "AND dimension=? AND task_hash=? AND can_invite IS NOT NULL",
                                     (bench, user_id, dimension, task_hash))
        return None if row is None else {"can_invite": bool(row["can_invite"]), "reason": row["reason"]}

    # -- passes ----------------------------------------------------------------------------
    async def record_pass(self, run: str, mode: str, k: int, variant: str, config: dict) -> None:
        await self.db.write([AttributionPassRow(run, mode, k, variant, config).statement()])

    async def passes(self, run: str) -> list[dict]:
        """{mode, k, variant, config} of every attribution pass of the run."""
        return [{"mode": r["mode"], "k": r["k"], "variant": r["variant"], "config": loads(r["config"])}
                for r in await self.db.fetchall("SELECT * FROM attribution_passes WHERE run=? ORDER BY mode, k, "
                                                "variant", (run,))]

