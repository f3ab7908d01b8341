"""Benchmark: the paper's tables for a 50-user × 5-system study (issue 6).

    .venv/bin/python bench/bench_tables.py

Builds a synthetic store with bulk inserts (31 tasks with turns, final snapshots, both access
modes scored, attributions and call records for every user and system), then times
`compute_tables` with 10,000 bootstrap resamples and rendering every format.
Target: tables in under 10 s.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.scoring.tables import compute_tables, render  # noqa: E402
from memaudit.store import open_store  # noqa: E402
from tests.scoring.synthetic import insert, synthetic_release  # noqa: E402

TARGET_S = 10.0


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with open_store(Path(tmp) / "bench.db") as store:
            start = time.perf_counter()
            rows = synthetic_release(users=50)
            await insert(store, rows)
            built = time.perf_counter() - start
            print(f"store: {len(rows['reconstructions'])} reconstructions, {len(rows['attributions'])} attributions, "
                  f"{len(rows['turns'])} turns, {len(rows['calls'])} calls; built in {built:.2f} s")

            start = time.perf_counter()
            tables = await compute_tables(store, bootstrap=10_000)
            computed = time.perf_counter() - start
            start = time.perf_counter()
            sizes = {fmt: len(render(tables, fmt)) for fmt in ("md", "latex", "csv", "json")}
            rendered = time.perf_counter() - start

    total = computed + rendered
    print(f"compute_tables (10,000 resamples): {computed:.2f} s; render md/latex/csv/json: {rendered:.3f} s "
          f"({', '.join(f'{k} {v} chars' for k, v in sizes.items())})")
    print(f"rows: table2 {len(tables['table2'])}, table3 {len(tables['table3'])}, table4 {len(tables['table4'])}, "
          f"comparisons {len(tables['comparisons'])}")
    print(f"tables total: {total:.2f} s (target < {TARGET_S:.0f} s) -> {'OK' if total < TARGET_S else 'TOO SLOW'}")


if __name__ == "__main__":
    anyio.run(main)
