"""Where the time of `memaudit demo` (what `make run` runs) goes: the demo as users run it (a CLI
process on the embedded model, loopback), then its calls read back through `memaudit calls --json`.

    .venv/bin/python perf/demo.py                 # run the demo on a scratch store, then break it down
    .venv/bin/python perf/demo.py --db STORE      # only break down the calls of a demo store

Prints per role: calls made, failed calls, prompt and completion tokens and the seconds the model
took (a failed call's seconds are those of all its attempts), then the model's total and the demo's
total wall time (the demo's own "Done in N s"). The machine must be otherwise idle for the total to
mean anything: the embedded server is CPU-bound on two cores. The target is 600 s for the demo.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEMAUDIT = [sys.executable, str(REPO / "memaudit.py")]


def run_demo(db: Path) -> float:
    """The demo's wall time as it reports it ("Done in N s"); the process's own if it does not."""
    start = time.perf_counter()
    done = subprocess.run([*MEMAUDIT, "--db", str(db), "demo", "--report", str(db.parent / "report")],
                          capture_output=True, text=True, cwd=db.parent)
    if done.returncode != 0:
        sys.exit(f"demo failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    found = re.search(r"Done in (\d+) s", done.stdout)
    return float(found.group(1)) if found else time.perf_counter() - start


def per_role(db: Path) -> dict[str, dict]:
    """Role -> calls, failed, prompt/completion tokens, seconds (token counts are not model calls)."""
    listed = subprocess.run([*MEMAUDIT, "--db", str(db), "calls", "--json"], capture_output=True, text=True,
                            check=True).stdout
    roles: dict[str, dict] = defaultdict(lambda: dict(calls=0, failed=0, prompt=0, completion=0, seconds=0.0))
    for line in listed.splitlines():
        call = json.loads(line)
        if call["role"].startswith("tokenize:"):
            continue
        row = roles[call["role"]]
        row["calls"] += 1
        row["failed"] += not call["ok"]
        row["prompt"] += call["usage"]["prompt_tokens"]
        row["completion"] += call["usage"]["completion_tokens"]
        row["seconds"] += call["latency"]
    return dict(sorted(roles.items(), key=lambda item: -item[1]["seconds"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="a demo store to break down instead of running the demo")
    args = parser.parse_args()
    total = None
    with tempfile.TemporaryDirectory(prefix="memaudit-demo-") as scratch:
        db = args.db or Path(scratch) / "memaudit.db"
        if args.db is None:
            total = run_demo(db)
        roles = per_role(db)
    print(f"{'role':<22}{'calls':>6}{'failed':>7}{'prompt tok':>12}{'compl. tok':>12}{'seconds':>9}")
    for role, r in roles.items():
        print(f"{role:<22}{r['calls']:>6}{r['failed']:>7}{r['prompt']:>12,}{r['completion']:>12,}{r['seconds']:>9.1f}")
    print(f"model time, all roles: {sum(r['seconds'] for r in roles.values()):.0f} s")
    if total is not None:
        print(f"demo total: {total:.0f} s (target: 600 s)")


if __name__ == "__main__":
    main()
