"""Benchmark: import-release of a 50-user, 5-run synthetic release (≈7,750 episode files, a few
hundred MB) through the real CLI in a subprocess, and `bench validate` of the 50 users.

Targets (issue 3): import under 60 s on 2 cores with peak RSS under 2 GB; validate under 2 s.
Run: .venv/bin/python perf/release_import.py
"""
from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memaudit.bench.instances import validate_bench  # noqa: E402
from memaudit.store import open_store  # noqa: E402
from memaudit.testing.release_fixture import PUBLISHED_RUNS as RUNS  # noqa: E402
from memaudit.testing.release_fixture import write_release  # noqa: E402

USERS = 50


def synthesise(root: Path) -> None:
    for i, (run, n, chars) in enumerate(RUNS):
        write_release(root, users=USERS, runs=(run,), turns=6, reply_chars=3000, memories=n, memory_chars=chars,
                      seed=i)


def tree_size(root: Path) -> tuple[int, int, int]:
    files = [p for p in root.rglob("*.json")]
    episodes = sum(1 for p in files if p.parts[-4] == "history" if len(p.parts) >= 4)
    return len(files), episodes, sum(p.stat().st_size for p in files)


async def validate(root: Path, db: Path) -> tuple[float, list[str]]:
    async with open_store(db) as store:
        start = time.perf_counter()
        problems = await validate_bench(store, str(root))
        return time.perf_counter() - start, problems


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "release"
        start = time.perf_counter()
        synthesise(root)
        n_files, n_episodes, size = tree_size(root)
        print(f"synthesised release: {n_files} JSON files, {n_episodes} episode files, {size / 1e6:.0f} MB "
              f"in {time.perf_counter() - start:.1f} s")

        seconds, problems = anyio.run(validate, root, Path(tmp) / "validate.db")
        print(f"bench validate (50 users, in-process): {seconds:.2f} s, {len(problems)} problems (target < 2 s)")
        start = time.perf_counter()
        subprocess.run([sys.executable, str(REPO / "memaudit.py"), "bench", "validate", str(root),
                        "--db", str(Path(tmp) / "validate.db")], check=True, stdout=subprocess.DEVNULL)
        print(f"bench validate (CLI process, incl. interpreter start): {time.perf_counter() - start:.2f} s")

        db = Path(tmp) / "import.db"
        start = time.perf_counter()
        subprocess.run([sys.executable, str(REPO / "memaudit.py"), "import-release", str(root), "--db", str(db)],
                       check=True)
        elapsed = time.perf_counter() - start
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"import-release: {elapsed:.1f} s (target < 60 s), peak RSS {peak_mb:.0f} MB (target < 2048 MB), "
              f"store {db.stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
