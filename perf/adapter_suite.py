"""Benchmark for issue 40's suite figure: what the fast adapter tests cost, and how much of it is
teardown (the per-test garbage collection the deployed libraries made expensive).

    .venv/bin/python perf/adapter_suite.py            # tests/adapters, not integration, in a pytest process

It runs `pytest -m "not integration" tests/adapters` as `make test-fast` does (a process of its
own, the libraries loaded) and prints its wall time, the test count and the seconds spent in the
tests' setup, call and teardown phases (pytest's own durations)."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PHASE = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s", re.M)


def main() -> None:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-m", "not integration",
                           "--durations=0", "--durations-min=0", "tests/adapters"],
                          cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    phases: dict[str, float] = defaultdict(float)
    for seconds, phase in PHASE.findall(done.stdout):
        phases[phase] += float(seconds)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "(no output)"
    print(f"tests/adapters (not integration): {wall:.0f} s wall; {summary}")
    print("  " + ", ".join(f"{phase} {phases[phase]:.0f} s" for phase in ("setup", "call", "teardown")))
    if done.returncode != 0:
        sys.exit(done.returncode)


if __name__ == "__main__":
    main()
