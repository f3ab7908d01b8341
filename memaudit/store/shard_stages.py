"""Shard stages: which shard I of N ran which command to its end in a store (db/018), and, across
the stores of a merge, which shards are missing."""
from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memaudit.store.rows import Row

if TYPE_CHECKING:
    from memaudit.store import Store


@dataclass(frozen=True)
class ShardStageRow(Row):
    TABLE = "shard_stages"
    VERB = "INSERT OR IGNORE"  # a shard's command run again records nothing new
    stage: str  # the command that ran to its end
    shard: int  # I, 1-based
    shards: int  # N


class ShardStages:
    def __init__(self, db: "Store"):
        self.db = db

    async def record(self, stage: str, shard: int, shards: int) -> None:
        await self.db.write([ShardStageRow(stage, shard, shards).statement()])


def recorded(path: Path) -> set[tuple[str, int, int]]:
    """(stage, shard, shards) rows of a store file; none when it has no such table (an older store)."""
    if not Path(path).exists():
        return set()
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='shard_stages'").fetchone() is None:
            return set()
        return {tuple(r) for r in conn.execute("SELECT stage, shard, shards FROM shard_stages")}


def missing_shards(stores: list[Path]) -> list[str]:
    """For every study of N shards recorded in any of `stores`, one line per shard of it that no
    store recorded running a stage the others ran: `shard 2 of 3: no rollout, score`."""
    found = set().union(*(recorded(p) for p in stores)) if stores else set()
    lines = []
    for shards in sorted({n for _, _, n in found}):
        stages = sorted({stage for stage, _, n in found if n == shards})
        for shard in range(1, shards + 1):
            absent = [stage for stage in stages if (stage, shard, shards) not in found]
            if absent:
                lines.append(f"shard {shard} of {shards}: no {', '.join(absent)}")
    return lines
