"""Plans: a study's cost estimate per run id, recorded before the run (memaudit/study/plan.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memaudit.stages import PLANNED
from memaudit.types import DEFAULT_VARIANT
from memaudit.store.rows import Row, dumps, loads

if TYPE_CHECKING:
    from memaudit.store import Store


@dataclass(frozen=True)
class PlanRow(Row):
    TABLE = "plans"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"estimate": dumps}
    run: str
    estimate: dict


class Plans:
    def __init__(self, db: "Store"):
        self.db = db

    async def save(self, estimates: dict[str, dict]) -> None:
        """Record (or replace) the estimate of each run id, in one transaction."""
        await self.db.write([PlanRow(run, estimate).statement() for run, estimate in estimates.items()])

    async def get(self, run: str) -> dict | None:
        row = await self.db.fetchone("SELECT estimate FROM plans WHERE run=?", (run,))
        return None if row is None else loads(row["estimate"])

    async def units(self, run: str) -> dict[str, int]:
        """The units of work a run holds, per planned stage: episodes, and targets scored or
        attributed (default variant); the per-unit rates of a plan are measured against these."""
        counts, params = [], []
        for stage in PLANNED:
            variants = "variant" in stage.tables.get(stage.unit.table, ())
            counts.append(f"(SELECT COUNT(*) FROM {stage.unit.table} WHERE run=?"
                          f"{' AND variant=?' if variants else ''}) AS \"{stage.name}\"")
            params += [run, DEFAULT_VARIANT] if variants else [run]
        return dict(await self.db.fetchone(f"SELECT {', '.join(counts)}", params))
