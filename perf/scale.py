"""Benchmark (issue 27): import-release, tables, view and export of a synthetic release at two study
sizes, each run as a CLI process on the path users run. Prints, per command and size, the wall
time, the CPU time (user + system: steadier than wall time on a shared machine), the process's peak
memory (max RSS) and the size of what it wrote, then the growth exponent of each figure between
the sizes (1.0 = linear, 2.0 = quadratic). `serve` is `view --serve`: the time until it serves
(the report's tables and run pages written), its CPU and memory including one user's data served.

The release is synthetic (memaudit/testing/release_fixture.py) with the published study's five
runs and their memory footprints; replies are shorter than the published ones so that the large
size fits a few minutes on 2 cores.
Run: .venv/bin/python perf/scale.py [--users 50,500] [--keep DIR]
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memaudit.testing.release_fixture import PUBLISHED_RUNS, write_release  # noqa: E402

TURNS, REPLY_CHARS = 3, 800
PEAK_DISK: dict[Path, int] = {}


def synthesise(root: Path, users: int) -> None:
    for i, (run, n, chars) in enumerate(PUBLISHED_RUNS):
        write_release(root, users=users, runs=(run,), turns=TURNS, reply_chars=REPLY_CHARS, memories=n,
                      memory_chars=chars, seed=i, wordy=True)


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def store_disk(db: Path) -> int:
    """Bytes of the store and everything SQLite or the import keeps beside it (WAL, side file)."""
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())


def run_cli(args: list[str], stdout=subprocess.DEVNULL, watch: Path | None = None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of one memaudit process; with `watch` (a store),
    also samples its disk use while the process runs (peak in PEAK_DISK)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(REPO / "memaudit.py"), *args], stdout=stdout,
                            stderr=subprocess.PIPE)
    if watch is not None:
        PEAK_DISK[watch] = 0
    while True:  # wait4 (not Popen.wait): it also returns the child's resource usage
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if watch is not None else 0)
        if pid:
            break
        PEAK_DISK[watch] = max(PEAK_DISK[watch], store_disk(watch))
        time.sleep(0.02)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"memaudit {' '.join(args)} failed: {proc.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def serve_cli(db: Path, out: Path) -> tuple[float, float, float]:
    """`view --serve` until it serves, then one user's data fetched through it, then stopped:
    (seconds until it served, CPU seconds, peak RSS in MiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(REPO / "memaudit.py"), "view", "--db", str(db), "--out", str(out),
                             "--serve"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    seconds = time.perf_counter() - start
    url = line.split("served at ", 1)[1].split()[0]
    user = sorted((out / "runs").glob("*.html"))[0]  # any run page links users; fetch the first user's data
    key = user.read_text().split("user.html#f=", 1)[1].split("&", 1)[0]
    with urllib.request.urlopen(url.rsplit("/", 1)[0] + f"/data/{key}.js") as response:
        response.read()
    proc.send_signal(signal.SIGTERM)  # not SIGINT: a process started in the background ignores it
    _, _, usage = os.wait4(proc.pid, 0)
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(work: Path, users: int, archive: bool) -> dict[str, tuple[float, float, float, int]]:
    root, db = work / "release", work / "audit.db"
    synthesise(root, users)
    figures = {}
    figures["import"] = (*run_cli(["import-release", str(root), "--db", str(db)], watch=db), size(db))
    print(f"{users:>5} users  import: peak disk of the store and its side files {PEAK_DISK[db] / 2**20:.0f} MiB "
          f"= {PEAK_DISK[db] / size(db):.2f} x the final store", flush=True)
    with open(work / "tables.json", "wb") as sink:
        figures["tables"] = (*run_cli(["tables", "--db", str(db), "--format", "json"], stdout=sink),
                             size(work / "tables.json"))
    figures["view"] = (*run_cli(["view", "--db", str(db), "--out", str(work / "report")]), size(work / "report"))
    figures["serve"] = (*serve_cli(db, work / "served"), size(work / "served"))
    target = ["--archive", str(work / "export.tar.gz")] if archive else ["--out", str(work / "export")]
    figures["export"] = (*run_cli(["export", "--db", str(db), *target]),
                         size(work / ("export.tar.gz" if archive else "export")))
    print(f"release of {users} users: {size(root) / 2**20:.0f} MiB", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", default="50,500", help="two study sizes, comma-separated")
    parser.add_argument("--archive", action="store_true", help="export with --archive instead of a directory")
    parser.add_argument("--keep", type=Path, default=None, help="work in this directory and keep it")
    args = parser.parse_args()
    sizes = [int(n) for n in args.users.split(",")]
    base = args.keep or Path(tempfile.mkdtemp(prefix="memaudit-scale-"))
    results = {}
    try:
        for n in sizes:
            work = base / f"u{n}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            results[n] = measure(work, n, args.archive)
            for step, (seconds, cpu, rss, out) in results[n].items():
                print(f"{n:>5} users  {step:<7} {seconds:7.1f} s  cpu {cpu:7.1f} s  peak {rss:6.0f} MiB  "
                      f"output {out / 2**20:10.3f} MiB", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    small, large = sizes[0], sizes[-1]
    print(f"growth exponent from {small} to {large} users (log ratio / log {large / small:g}):")
    for step in results[small]:
        exps = [math.log(results[large][step][i] / results[small][step][i]) / math.log(large / small)
                if results[small][step][i] > 0 and results[large][step][i] > 0 else float("nan") for i in range(4)]
        print(f"  {step:<7} time {exps[0]:5.2f}  cpu {exps[1]:5.2f}  peak memory {exps[2]:5.2f}  output {exps[3]:5.2f}")


if __name__ == "__main__":
    main()
