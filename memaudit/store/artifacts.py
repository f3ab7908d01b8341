"""Whole-table access for replay: the inputs a scratch store starts from, and every artifact row
in key order for the row-by-row comparison."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memaudit.stages import STAGES
from memaudit.store.faults import faults
from memaudit.store.rows import marks

if TYPE_CHECKING:
    from memaudit.store import Store

# What a scratch store starts from: the inputs and the caches, never an artifact. Human grades are
# data a person gave (`human import`), not calls: replay carries them, it cannot remake them.
INPUTS = ("benchmarks", "users", "bank_entries", "bank_history", "tasks", "calls", "embeddings", "param_refusals",
          "act_scenarios", "imported_oracle", "human_grades")
# What a teacher-forced run reads of its source run (RunConfig.transcripts): copied as an input
# when replay does not re-execute the source (an imported release, a run not asked for).
TRANSCRIPTS = ("runs", "episodes", "turns", "turn_changes")
# Artifact tables and their keys, in comparison order (the first difference is reported): each
# stage's tables, in pipeline order (memaudit/stages.py).
ARTIFACTS = {table: key for stage in STAGES for table, key in stage.tables.items()}
ORACLE_KEY = ("bench", "user_id", "dimension", "task_hash")


async def copy_inputs(store: "Store", source: Path, transcripts_of: list[str] = ()) -> None:
    """Copy every input table of the store at `source` into `store`, and the TRANSCRIPTS rows of the
    runs `transcripts_of`, in one transaction."""
    with faults(store.path):
        await store.conn.execute("ATTACH DATABASE ? AS recorded", (str(source),))
        await store.write([(f"INSERT INTO {table} SELECT * FROM recorded.{table}", ()) for table in INPUTS]
                          + [(f"INSERT INTO {table} SELECT * FROM recorded.{table} WHERE run=?", (run,))
                             for run in transcripts_of for table in TRANSCRIPTS])
        await store.conn.execute("DETACH DATABASE recorded")


async def artifact_rows(store: "Store", table: str, runs: list[str]):
    """Every row of an ARTIFACTS table for the runs, in key order."""
    return await store.fetchall(f"SELECT * FROM {table} WHERE run IN ({marks(runs)}) "
                                f"ORDER BY {', '.join(ARTIFACTS[table])}", runs)


async def oracle_rows(store: "Store"):
    """Every oracle verdict, in key order."""
    return await store.fetchall(f"SELECT * FROM oracle ORDER BY {', '.join(ORACLE_KEY)}")


async def oracle_row(store: "Store", key: tuple):
    """The oracle verdict with these ORACLE_KEY values, or None."""
    return await store.fetchone(f"SELECT * FROM oracle WHERE {' AND '.join(f'{c}=?' for c in ORACLE_KEY)}", key)
