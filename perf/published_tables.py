"""Benchmark (issue 45): the published tables recomputed from the raw release records agree with the
release's own reports, figure by figure.

    .venv/bin/python perf/published_tables.py --release ~/MemProbe

The release (a checkout of the published code, commit 19bb836, which holds it) is imported into a
scratch store as `import-release` does (per-user episodes, memories, judgments; the aggregate
`*_merged.json` reports are never read by the import), its Tables 2 and 3 are computed
(`compute_tables`, no bootstrap), and each figure is compared with the same figure of the latest
50-user report the published runner wrote per run and access mode (`output/<run>[_retrieve]/`):
A, B per category and overall, C, C over satisfied episodes, D and E's items and characters per
item, each mean and standard deviation the report gives. Prints one line per disagreement, the
count that agree, and the import and table times. A figure agrees within 1e-9 (A is a percentage
in memaudit's table, a fraction in the report).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.release.importer import import_release  # noqa: E402
from memaudit.store import open_store  # noqa: E402
from memaudit.tables.paper import compute_tables  # noqa: E402
from memaudit.types import CATEGORIES  # noqa: E402

TOLERANCE = 1e-9
USERS = 50
# Table 2's columns and where the published report keeps the same figure (A as a fraction there).
EPISODE_FIGURES = {"A": ("A_task_completion_rate", "mean", 100.0), "A_std": ("A_task_completion_rate", "std", 100.0),
                   "C": ("C_avg_turns_all", "mean", 1.0), "C_std": ("C_avg_turns_all", "std", 1.0),
                   "C_satisfied": ("C_avg_turns_satisfied", "mean", 1.0),
                   "D": ("D_preference_score", "mean", 1.0), "D_std": ("D_preference_score", "std", 1.0)}
FOOTPRINT_FIGURES = {"items": "num_memories", "chars": "avg_memory_chars"}


def latest_report(folder: Path) -> dict | None:
    """The aggregate of the newest report of all 50 users in a run's output folder."""
    found = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json")) if not p.name.startswith("user_")]
    full = [r for r in found if r.get("num_users") == USERS]
    return full[-1]["aggregate"] if full else None


def expected(release: Path, run: str, mode: str) -> dict | None:
    return latest_report(release / "output" / (run if mode == "dump_all" else f"{run}_retrieve"))


def comparisons(release: Path, tables: dict):
    """(where, recomputed, published) for every figure a report gives."""
    for row in tables["table2"]:
        report = expected(release, row["run"], "dump_all")
        if report is None:
            continue
        for column, (name, stat, scale) in EPISODE_FIGURES.items():
            yield f"{row['run']} {column}", row[column], report[name][stat] * scale
        for column, name in FOOTPRINT_FIGURES.items():
            for stat, suffix in (("mean", ""), ("std", "_std")):
                yield f"{row['run']} {column}{suffix}", row[column + suffix], report["E_memory_footprint"][name][stat]
    for row in tables["table3"]:
        report = expected(release, row["run"], row["mode"])
        if report is None:
            continue
        for category in (*CATEGORIES, "overall"):
            for stat, suffix in (("mean", ""), ("std", "_std")):
                yield (f"{row['run']} {row['mode']} B {category}{suffix}", row[category + suffix],
                       report["B_reconstruction"][stat][category])


def agrees(recomputed, published) -> bool:
    if recomputed is None or published is None:
        return recomputed is published
    return abs(recomputed - published) <= TOLERANCE * max(1.0, abs(published))


async def measure(release: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with open_store(Path(tmp) / "release.db") as store:
            started = time.perf_counter()
            await import_release(store, release)
            imported = time.perf_counter() - started
            started = time.perf_counter()
            tables = await compute_tables(store, None, bootstrap=0)
            computed = time.perf_counter() - started
    found = list(comparisons(release, tables))
    wrong = [(where, a, b) for where, a, b in found if not agrees(a, b)]
    for where, a, b in wrong:
        print(f"differs: {where}: recomputed {a!r}, published {b!r}")
    print(f"published figures recomputed from the release: {len(found) - len(wrong)}/{len(found)} agree "
          f"(within {TOLERANCE:g}; import {imported:.1f} s, tables {computed:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", type=Path, required=True, help="a checkout of the published code (19bb836)")
    anyio.run(measure, parser.parse_args().release)


if __name__ == "__main__":
    main()
