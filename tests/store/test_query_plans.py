"""No repository query may read a whole large table, or a whole run to find one user's rows.

The queries are collected, not listed by hand: a representative pipeline (rollout, both scoring
modes, attribution, tables, the report, export, and import of that export into a second store)
runs with SQLite's trace callback on every connection of its stores, and each distinct statement
it executed is then explained (`EXPLAIN QUERY PLAN`). A `SCAN` of a large table fails, and so does
a `SEARCH` that narrows a large table without the user a statement asks for (the report's per-user
reads were once quadratic that way: the primary key starts with the run)."""
from __future__ import annotations

import re
import sqlite3

import pytest

from memaudit.release.exporter import export_runs
from memaudit.release.importer import import_release
from memaudit.report.view import write_report
from memaudit.scoring.attribution import attribute_runs
from memaudit.scoring.recovery import score_runs
from memaudit.tables.paper import compute_tables
from memaudit.store import open_store
from tests.scoring.recorded import record, runtime, script

pytestmark = pytest.mark.anyio

# Tables that stay small whatever the study's size (one row per run, pass, benchmark or model).
SMALL = {"runs", "benchmarks", "score_passes", "utilization_passes", "param_refusals", "sqlite_master",
         "sqlite_schema"}
SKIP = re.compile(r"^\s*(PRAGMA|BEGIN|COMMIT|ROLLBACK|CREATE|ATTACH|DETACH|ALTER|DROP|SAVEPOINT|RELEASE)\b"
                  r"|^\s*INSERT\b(?!.*\bSELECT\b)", re.I | re.S)


async def tracing(store, seen: set[str]) -> None:
    await store.conn.set_trace_callback(seen.add)
    if store._reader is not None:
        store._reader.set_trace_callback(seen.add)


async def test_every_query_uses_an_index_that_narrows_to_what_it_asks(settings, fake, tmp_path):
    seen: set[str] = set()
    script(fake)
    async with runtime(settings, fake) as rt:
        await tracing(rt.store, seen)
        await record(rt, ("longctx_full", "nomem"), users=2, tasks=3)
        await score_runs(rt, ["longctx_full", "nomem"], ["dump_all", "retrieve"])
        await attribute_runs(rt, ["longctx_full"], ["dump_all", "retrieve"])
        await compute_tables(rt.store, ["longctx_full", "nomem"])
        await write_report(rt.store, tmp_path / "report")
        await export_runs(rt.store, None, tmp_path / "release")
    async with open_store(tmp_path / "imported.db") as store:
        await tracing(store, seen)
        await import_release(store, tmp_path / "release")
        await compute_tables(store, None)
        await write_report(store, tmp_path / "report2")

    statements = sorted(s for s in seen if not SKIP.match(s) and " recorded." not in s and " src." not in s)
    assert len(statements) > 40, "the pipeline ran too few queries to be representative"
    problems = []
    with sqlite3.connect(settings.db) as conn:
        for sql in statements:
            plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
            problems += [f"{step}\n    in: {sql[:300]}" for step in plan_problems(sql, plan)]
    assert not problems, "\n".join(problems)


def plan_problems(sql: str, plan: list[str]) -> list[str]:
    aliases = table_aliases(sql)
    asks_user = re.search(r"\buser_id\s*(=\s*'|IN\s*\()", sql, re.I) is not None
    found = []
    for step in plan:
        match = re.match(r"(SCAN|SEARCH) (\S+)(?: USING .*?INDEX \S+(?: \((.*)\))?)?", step)
        if match is None:
            continue
        kind, name, constraint = match.groups()
        table = aliases.get(name, name)
        if table in SMALL or table not in TABLES:
            continue
        if kind == "SCAN":
            found.append(f"full scan of {table}: {step}")
        elif asks_user and "user_id" in TABLES[table] and "user_id" not in (constraint or ""):
            found.append(f"{table} narrowed without the user asked for: {step}")
    return found


def table_aliases(sql: str) -> dict[str, str]:
    return {alias: table for table, alias in re.findall(r"\b(?:FROM|JOIN)\s+(\w+)\s+(?:AS\s+)?(\w+)", sql, re.I)
            if alias.upper() not in {"WHERE", "ON", "JOIN", "LEFT", "INNER", "GROUP", "ORDER", "USING", "LIMIT"}}


def _columns() -> dict[str, set[str]]:
    """Every table of a fresh store and its columns."""
    conn = sqlite3.connect(":memory:")
    from memaudit.store import SCHEMA_DIR
    for script_path in sorted(SCHEMA_DIR.glob("[0-9][0-9][0-9]_*.sql")):
        conn.executescript(script_path.read_text())
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")} for t in tables}


TABLES = _columns()
