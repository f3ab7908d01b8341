"""Benchmark: the paper's tables for a 50-user × 5-system study (issue 6).

    .venv/bin/python perf/paper_tables.py

1. A synthetic store built with bulk inserts (31 tasks with turns, final snapshots, both access
   modes scored, attributions and call records for every user and system): times
   `compute_tables` with 10,000 bootstrap resamples and rendering every format.
2. The same shape as a release in the published layout, imported with `import_release`: times
   the tables of the imported runs (writing the release files is not timed).
Target: tables in under 10 s each.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.release.importer import import_release  # noqa: E402
from memaudit.store import open_store  # noqa: E402
from memaudit.tables.paper import compute_tables  # noqa: E402
from memaudit.tables.paper_render import render  # noqa: E402
from memaudit.testing.release_fixture import write_release  # noqa: E402
from memaudit.testing.synthetic_scores import insert, synthetic_release  # noqa: E402

TARGET_S = 10.0
RELEASE_RUNS = ("amem_pooled_50", "longctx_full_pooled_50", "mem0_pooled_50", "memt_memonly_pooled_50",
                "nomem_pooled_50")


def verdict(seconds: float) -> str:
    return f"{seconds:.2f} s (target < {TARGET_S:.0f} s) -> {'OK' if seconds < TARGET_S else 'TOO SLOW'}"


async def synthetic_store(tmp: Path) -> None:
    async with open_store(tmp / "bench.db") as store:
        start = time.perf_counter()
        rows = synthetic_release(users=50)
        await insert(store, rows)
        print(f"synthetic store: {len(rows['reconstructions'])} reconstructions, {len(rows['attributions'])} "
              f"attributions, {len(rows['turns'])} turns, {len(rows['calls'])} calls; built in "
              f"{time.perf_counter() - start:.2f} s")
        start = time.perf_counter()
        tables = await compute_tables(store, bootstrap=10_000)
        computed = time.perf_counter() - start
        start = time.perf_counter()
        sizes = {fmt: len(render(tables, fmt)) for fmt in ("md", "latex", "csv", "json")}
        rendered = time.perf_counter() - start
    print(f"  compute_tables (10,000 resamples): {computed:.2f} s; render md/latex/csv/json: {rendered:.3f} s "
          f"({', '.join(f'{k} {v} chars' for k, v in sizes.items())})")
    print(f"  rows: table2 {len(tables['table2'])}, table3 {len(tables['table3'])}, table4 {len(tables['table4'])}, "
          f"comparisons {len(tables['comparisons'])}")
    print(f"  tables total: {verdict(computed + rendered)}")


async def imported_release(tmp: Path) -> None:
    start = time.perf_counter()
    root = write_release(tmp / "release", users=50, runs=RELEASE_RUNS)
    written = time.perf_counter() - start
    async with open_store(tmp / "imported.db") as store:
        start = time.perf_counter()
        await import_release(store, root)
        imported = time.perf_counter() - start
        start = time.perf_counter()
        tables = await compute_tables(store, bootstrap=10_000)
        text = render(tables, "md")
        elapsed = time.perf_counter() - start
    print(f"imported release (50 users × 5 runs): files written in {written:.1f} s, imported in {imported:.1f} s")
    print(f"  tables + md: {verdict(elapsed)} ({len(text)} chars, {len(tables['comparisons'])} comparisons)")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        await synthetic_store(Path(tmp))
        await imported_release(Path(tmp))


if __name__ == "__main__":
    anyio.run(main)
