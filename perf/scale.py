"""Benchmark (issue 27): import-release, tables, view and export of a synthetic release at two study
sizes, each run as a CLI process on the path users run. Prints, per command and size, the wall
time, the CPU time (user + system: steadier than wall time on a shared machine), the process's peak
memory (max RSS) and the size of what it wrote, then the growth exponent of each figure between
the sizes (1.0 = linear, 2.0 = quadratic). `serve` is `view --serve`: the time until it serves
(the report's tables and run pages written), its CPU and memory including one user's data served.

The release is synthetic (memaudit/testing/release_fixture.py) with the published study's five
runs and their memory footprints; replies are shorter than the published ones so that the large
size fits a few minutes on 2 cores. With `--release DIR` (a release in the published layout, e.g.
a checkout of the published code, which holds its 50-user release) each size is that release
replicated: user i is a copy of the release's user i mod N under a new id, as the issue measured.

Last, the acceptance figures of issue 27 (CPU seconds, as the issue measured): the report's bytes
and time against the report before it (the issue's figures, 3.7 MiB per user and `view` 62 s at 500
users on its machine; with `--baseline DIR`, that code's `view` measured here on the same stores), `view` against
`tables` at each size, `view` growth between the first two sizes (50 -> 150: at most 3.6x), peak
memory at the largest size against the smallest (at most 1.5x), and the free disk the import
needed against the final store (at most 1.1x).
Run: .venv/bin/python perf/scale.py [--users 50,150,500] [--release DIR] [--baseline DIR] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
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
# The report before issue 27, measured on the published release replicated (the text).
OLD_REPORT_MIB_PER_USER, OLD_VIEW_CPU_500 = 3.7, 62.0
REPORT_MIB_50, REPORT_SHARE, VIEW_OVER_TABLES, VIEW_GROWTH, MEMORY_GROWTH, IMPORT_DISK = 20, 0.10, 2.0, 3.6, 1.5, 1.1


def synthesise(root: Path, users: int) -> None:
    for i, (run, n, chars) in enumerate(PUBLISHED_RUNS):
        write_release(root, users=users, runs=(run,), turns=TURNS, reply_chars=REPLY_CHARS, memories=n,
                      memory_chars=chars, seed=i, wordy=True)


USER_ID = re.compile(rb'("user_id"\s*:\s*)"[^"]*"')
RELEASE_PARTS = ("Deeppersona/data", "benchmark_data", "history", "pref_judge", "memory", "output")


def replicate(source: Path, root: Path, users: int) -> None:
    """`source` (a release in the published layout) with `users` users: user i (1-based) is a copy
    of the source's user ((i - 1) mod N) + 1 named user_<i> (three digits at least); aggregate
    reports (`*_merged.json`, run summaries) are not copied (the import never reads them)."""
    banks = source / "Deeppersona/data/user_memory_banks_pooled_final.json"
    bank = json.loads(banks.read_bytes())
    originals = [u["user_id"] for u in bank["users"]]
    copies = {f"user_{i + 1:03d}": originals[i % len(originals)] for i in range(users)}
    by_id = {u["user_id"]: u for u in bank["users"]}
    bank["users"] = [{**by_id[old], "user_id": new} for new, old in copies.items()]
    bank["num_users"] = users
    (root / banks.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
    (root / banks.relative_to(source)).write_text(json.dumps(bank))
    for other in sorted((source / "Deeppersona/data").glob("*.json")):
        if other != banks:
            shutil.copyfile(other, root / other.relative_to(source))
    for part in RELEASE_PARTS[1:]:
        for holder in sorted({p.parent for p in (source / part).rglob("user_*")}):
            for new, old in copies.items():
                for path in holder.glob(old + "*"):
                    _copy_user(path, root / holder.relative_to(source) / (new + path.name[len(old):]), new)


def _copy_user(path: Path, target: Path, user: str) -> None:
    """A user's file or folder under another id (its `user_id` fields rewritten)."""
    if path.is_dir():
        for inner in sorted(path.iterdir()):
            _copy_user(inner, target / inner.name, user)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(USER_ID.sub(rb'\1"' + user.encode() + rb'"', path.read_bytes()))


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def store_disk(db: Path) -> int:
    """Bytes of the store and everything SQLite or the import keeps beside it (WAL, side file)."""
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())


def run_cli(args: list[str], stdout=subprocess.DEVNULL, watch: Path | None = None,
            repo: Path = REPO) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of one memaudit process (of the checkout `repo`);
    with `watch` (a store), also samples its disk use while the process runs (peak in PEAK_DISK)."""
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.Popen([sys.executable, str(repo / "memaudit.py"), *args], stdout=stdout,
                            stderr=subprocess.PIPE, env=env)
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
    proc.send_signal(signal.SIGTERM)  # what a job runner sends; SIGINT stops it the same way
    _, _, usage = os.wait4(proc.pid, 0)
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(work: Path, users: int, archive: bool, release: Path | None,
            baseline: Path | None) -> dict[str, tuple[float, float, float, int]]:
    root, db = work / "release", work / "audit.db"
    if release is None:
        synthesise(root, users)
    else:
        replicate(release, root, users)
    figures = {}
    figures["import"] = (*run_cli(["import-release", str(root), "--db", str(db)], watch=db), size(db))
    figures["disk"] = PEAK_DISK[db] / size(db)
    print(f"{users:>5} users  import: peak disk of the store and its side files {PEAK_DISK[db] / 2**20:.0f} MiB "
          f"= {figures['disk']:.2f} x the final store", flush=True)
    with open(work / "tables.json", "wb") as sink:
        figures["tables"] = (*run_cli(["tables", "--db", str(db), "--format", "json"], stdout=sink),
                             size(work / "tables.json"))
    figures["view"] = (*run_cli(["view", "--db", str(db), "--out", str(work / "report")]), size(work / "report"))
    figures["serve"] = (*serve_cli(db, work / "served"), size(work / "served"))
    target = ["--archive", str(work / "export.tar.gz")] if archive else ["--out", str(work / "export")]
    figures["export"] = (*run_cli(["export", "--db", str(db), *target]),
                         size(work / ("export.tar.gz" if archive else "export")))
    if baseline is not None:  # the report before issue 27, on its own store (it cannot read a newer one)
        old_db = work / "baseline.db"
        run_cli(["import-release", str(root), "--db", str(old_db)], repo=baseline)
        figures["old view"] = (*run_cli(["view", "--db", str(old_db), "--out", str(work / "old-report")],
                                        repo=baseline), size(work / "old-report"))
        old_db.unlink()
        shutil.rmtree(work / "old-report")
    print(f"release of {users} users: {size(root) / 2**20:.0f} MiB", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", default="50,150,500",
                        help="study sizes, comma-separated: growth exponents between the first and the last, view "
                             "growth between the first two")
    parser.add_argument("--archive", action="store_true", help="export with --archive instead of a directory")
    parser.add_argument("--keep", type=Path, default=None, help="work in this directory and keep it")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a checkout of memaudit from before issue 27 (e.g. `git worktree add DIR 46164a7`): "
                             "its `view` is measured on each size and the report's share is taken against it "
                             "instead of the figures the issue measured on another machine")
    parser.add_argument("--release", type=Path, default=None,
                        help="replicate this release (published layout) to each size instead of a synthetic one")
    args = parser.parse_args()
    sizes = [int(n) for n in args.users.split(",")]
    base = args.keep or Path(tempfile.mkdtemp(prefix="memaudit-scale-"))
    results = {}
    try:
        for n in sizes:
            work = base / f"u{n}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            results[n] = measure(work, n, args.archive, args.release, args.baseline)
            for step, (seconds, cpu, rss, out) in steps(results[n]).items():
                print(f"{n:>5} users  {step:<7} {seconds:7.1f} s  cpu {cpu:7.1f} s  peak {rss:6.0f} MiB  "
                      f"output {out / 2**20:10.3f} MiB", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    small, large = sizes[0], sizes[-1]
    print(f"growth exponent from {small} to {large} users (log ratio / log {large / small:g}):")
    for step in steps(results[small]):
        exps = [math.log(results[large][step][i] / results[small][step][i]) / math.log(large / small)
                if results[small][step][i] > 0 and results[large][step][i] > 0 else float("nan") for i in range(4)]
        print(f"  {step:<7} time {exps[0]:5.2f}  cpu {exps[1]:5.2f}  peak memory {exps[2]:5.2f}  output {exps[3]:5.2f}")

    acceptance(results, sizes)


def steps(figures: dict) -> dict:
    return {k: v for k, v in figures.items() if k != "disk"}


def verdict(value: float, limit: float) -> str:
    return f"{value:.2f} (target <= {limit:g}: {'met' if value <= limit else 'MISSED'})"


def acceptance(results: dict, sizes: list[int]) -> None:
    """Issue 27's figures; `view` is the static report, `serve` the report served by `view --serve`."""
    small, large = sizes[0], sizes[-1]
    print("acceptance (issue 27; times are CPU seconds):")
    for step in ("view", "serve"):
        mib = results[small][step][3] / 2**20
        print(f"  {step:<5} report of {small} users: {mib:.1f} MiB, target <= {REPORT_MIB_50} MiB: "
              f"{'met' if mib <= REPORT_MIB_50 else 'MISSED'}")
        old = results[large].get("old view")
        if old is not None:  # the old report measured here, on this machine
            print(f"  {step:<5} report bytes at {large} users / the old report's ({old[3] / 2**20:.0f} MiB): "
                  f"{verdict(results[large][step][3] / old[3], REPORT_SHARE)}")
            print(f"  {step:<5} CPU at {large} users / the old view's ({old[1]:.1f} s on this machine): "
                  f"{verdict(results[large][step][1] / old[1], REPORT_SHARE)}")
        else:
            share = results[large][step][3] / 2**20 / large / OLD_REPORT_MIB_PER_USER
            print(f"  {step:<5} report bytes per user at {large} users / the old report's: "
                  f"{verdict(share, REPORT_SHARE)}")
            if large == 500:
                print(f"  {step:<5} CPU at 500 users / the old view's 62 s (the issue's machine): "
                      f"{verdict(results[large][step][1] / OLD_VIEW_CPU_500, REPORT_SHARE)}")
        for n in sizes:
            ratio = results[n][step][1] / results[n]["tables"][1]
            print(f"  {step:<5} / tables CPU at {n} users: {verdict(ratio, VIEW_OVER_TABLES)}")
        if len(sizes) > 2:
            growth = results[sizes[1]][step][1] / results[small][step][1]
            print(f"  {step:<5} CPU growth {small} -> {sizes[1]} users: {verdict(growth, VIEW_GROWTH)}")
    for step in ("tables", "view", "serve", "export"):
        ratio = results[large][step][2] / results[small][step][2]
        print(f"  peak memory of {step:<6} {large} / {small} users: {verdict(ratio, MEMORY_GROWTH)}")
    for n in sizes:
        print(f"  import at {n} users: peak disk / final store {verdict(results[n]['disk'], IMPORT_DISK)}")


if __name__ == "__main__":
    main()
