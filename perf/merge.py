"""Benchmark: `memaudit merge` of 16 shard stores that together hold a published-size study
(50 users × 5 systems, synthetic; issue 26).

    .venv/bin/python perf/bench_merge.py [--shards 16] [--request-bytes 2000] [--response-bytes 500]

The study is memaudit/testing/synthetic_scores.py's full synthetic study (31 tasks with turns,
final snapshots, both modes scored, attributions) with a call record for every call such a study
makes: the agent, simulator and preference judge per turn, slot-fill and recovery judge per target,
and the attribution stages per target below 0.75 (≈ 10⁵ calls, as the published study made). Each
call carries a request and a response of the given sizes. The rows are split into shard stores by
the (system, user) cell hash that `--shard I/N` uses; building them is not timed.

Timed: `memaudit merge SHARD… --into STUDY.db` as a CLI process (the path users run), wall time and
the child's peak resident memory; then the same merge again (nothing new: the study is left as it
was), and the row counts of the merged study against the unsplit rows.
"""
from __future__ import annotations

import argparse
import hashlib
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memaudit.roles import DIALOGUE_PHASE, DISCLOSURE, ELICITATION, RECOVERY_JUDGE, SLOT_FILL, groups_of  # noqa: E402
from memaudit.store import open_store  # noqa: E402
from memaudit.shards import cell_shard  # noqa: E402
from memaudit.testing.synthetic_scores import call_rows, call_use_row, insert, synthetic_release  # noqa: E402

CELL_TABLES = ("episodes", "turns", "snapshots", "reconstructions", "attributions")  # rows of one (run, user)


def study_rows(request_bytes: int, response_bytes: int) -> dict[str, list]:
    """The synthetic study with every call of the published pipeline recorded."""
    rows = synthetic_release(users=50)
    rows["calls"], rows["call_uses"] = [], []
    request, response = "r" * request_bytes, "a" * response_bytes
    system = {run.run: run.system for run in rows["runs"]}

    def call(run, artifact, role, n):
        key = f"b2:{run}:{artifact}:{role}:{n}"
        rows["calls"].append(replace(call_rows(key, role, request_bytes // 4, response_bytes // 4), request=request,
                                     response=response))
        rows["call_uses"].append(call_use_row(run, artifact, key, role))

    for t in rows["turns"]:
        for role in groups_of(DIALOGUE_PHASE):
            call(t.run, f"episode:{t.user_id}:{t.task_idx}", role, t.turn)
    for r in rows["reconstructions"]:
        for role in (SLOT_FILL, RECOVERY_JUDGE):
            call(r.run, f"recon:{r.mode}:{r.k}:{r.variant}:{r.user_id}:{r.dimension}", role, 0)
    for a in rows["attributions"]:
        for role in ((DISCLOSURE, ELICITATION) if a.label != "ok" else ()):
            call(a.run, f"attr:{a.mode}:{a.k}:{a.variant}:{a.user_id}:{a.dimension}", role, 0)
    rows["__system__"] = system
    return rows


def split(rows: dict, shards: int) -> list[dict[str, list]]:
    """Each cell's rows into its shard; the benchmark and the run rows into every shard."""
    system = rows.pop("__system__")
    parts = [{table: [] for table in rows} for _ in range(shards)]
    owner: dict[str, int] = {}
    for table, values in rows.items():
        for row in values:
            if table in CELL_TABLES:
                parts[cell_shard(system[row.run], row.user_id, shards) - 1][table].append(row)
            elif table == "call_uses":
                fields = row.artifact.split(":")
                user = fields[1] if row.artifact.startswith("episode") else fields[4]
                shard = cell_shard(system[row.run], user, shards) - 1
                owner[row.key] = shard
                parts[shard][table].append(row)
            elif table != "calls":
                for part in parts:
                    part[table].append(row)
    for row in rows["calls"]:
        parts[owner[row.key]]["calls"].append(row)
    return parts


async def build(tmp: Path, parts: list[dict]) -> list[Path]:
    paths = []
    for i, part in enumerate(parts, 1):
        path = tmp / f"shard{i:02d}.db"
        async with open_store(path) as store:
            await insert(store, part)
        paths.append(path)
    return paths


# The merge process reports its own peak resident set size (a child's rusage seen from here would be
# the largest of all children so far).
CHILD = ("import resource, sys\n"
         "from memaudit.cli import main\n"
         "try:\n    main(sys.argv[1:])\n"
         "finally:\n    print('maxrss', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n")


def merge(paths: list[Path], into: Path) -> tuple[float, float, str]:
    """Wall seconds and peak RSS (MiB) of one `memaudit merge` process, and its last line."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, "merge", *map(str, paths), "--into", str(into)],
                          capture_output=True, text=True, cwd=REPO)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"merge failed: {done.stderr.strip()}")
    peak = next(int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("maxrss"))
    return elapsed, peak / 1024, done.stdout.strip().splitlines()[-1]


def digest(path: Path) -> str:
    """The file's sha256, read in chunks (a study held in memory here would swell the child's
    measured peak: a forked child starts with its parent's pages)."""
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def counts(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("episodes", "turns", "reconstructions", "attributions", "calls", "call_uses")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--request-bytes", type=int, default=2000)
    parser.add_argument("--response-bytes", type=int, default=500)
    args = parser.parse_args()
    rows = study_rows(args.request_bytes, args.response_bytes)
    expected = {t: len(rows[t]) for t in ("episodes", "turns", "reconstructions", "attributions", "calls",
                                          "call_uses")}
    with tempfile.TemporaryDirectory(prefix="memaudit-merge-") as tmp_dir:
        tmp = Path(tmp_dir)
        start = time.perf_counter()
        paths = anyio.run(build, tmp, split(rows, args.shards))
        del rows  # not in this process while the merge processes run
        size = sum(p.stat().st_size for p in paths) / 2**20
        print(f"{args.shards} shard stores: {size:,.0f} MiB, {expected['calls']:,} calls, {expected['turns']:,} "
              f"turns, {expected['reconstructions']:,} reconstructions (built in {time.perf_counter() - start:.0f} s, "
              "not timed)")
        into = tmp / "study.db"
        elapsed, peak, last = merge(paths, into)
        print(f"merge of {args.shards} shards into a new study: {elapsed:.1f} s wall, peak RSS {peak:,.0f} MiB ({last})")
        merged = counts(into)
        print(f"  merged rows equal the unsplit study's: {merged == expected} ({merged})")
        before = digest(into)
        elapsed, peak, last = merge(paths, into)
        print(f"merge again (nothing new): {elapsed:.1f} s wall, peak RSS {peak:,.0f} MiB; study unchanged: "
              f"{digest(into) == before} ({last})")


if __name__ == "__main__":
    main()
