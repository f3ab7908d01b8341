"""Benchmark: `memaudit view` over an imported 50-user × 5-run synthetic release (the published
study's size: 7,750 episodes, 31 targets per user, dump_all and retrieve passes).

Issue 7 asks that the report stays responsive at this size: pages are loaded per user and per
target, so the figures to watch are the time to write it, the number of pages, the total size,
and the largest single page (no multi-MB page).
Run: .venv/bin/python perf/report.py
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memaudit.release.importer import import_release  # noqa: E402
from memaudit.report.view import write_report  # noqa: E402
from memaudit.store import open_store  # noqa: E402
from memaudit.testing.release_fixture import PUBLISHED_RUNS as RUNS  # noqa: E402
from memaudit.testing.release_fixture import write_release  # noqa: E402

USERS = 50


async def build(root: Path, db: Path, out: Path) -> float:
    async with open_store(db) as store:
        await import_release(store, root)
        start = time.perf_counter()
        await write_report(store, out)
        return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, out = Path(tmp) / "release", Path(tmp) / "report"
        for i, (run, n, chars) in enumerate(RUNS):
            write_release(root, users=USERS, runs=(run,), turns=6, reply_chars=1500, memories=n,
                          memory_chars=chars, seed=i)
        seconds = anyio.run(build, root, Path(tmp) / "audit.db", out)
        pages = sorted(out.rglob("*.html"), key=lambda p: p.stat().st_size)
        total = sum(p.stat().st_size for p in pages)
        largest = pages[-1]
        print(f"view over {USERS} users x {len(RUNS)} runs: {seconds:.1f} s, {len(pages)} pages, "
              f"{total / 1e6:.0f} MB in total")
        print(f"index.html {(out / 'index.html').stat().st_size / 1e3:.0f} kB; largest page "
              f"{largest.stat().st_size / 1e3:.0f} kB ({largest.relative_to(out)}); median page "
              f"{pages[len(pages) // 2].stat().st_size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
