"""Benchmark for issue 32's install and test figures: what the deployed memory libraries cost.

    .venv/bin/python perf/deployed_libraries.py              # per library: check-adapter wall time
    .venv/bin/python perf/deployed_libraries.py --install    # also: the extras' install time

For each deployed library registered here (mem0ai, graphiti, llamaindex, langmem, agno, cognee, letta,
memos) it runs `memaudit check-adapter NAME` as users run it (a CLI process; the library's calls over loopback
HTTP through the recording proxy; cognee's, letta's and memos' in worker processes of their own environments) and prints
its wall time: the part of `make test` each library's contract costs. With `--install` it first
times, in a scratch virtualenv, `pip install` of the `agno` extra and then of the rest of the `all`
extra on top of memaudit's core, and the build of each own environment (scripts/library_env.sh),
with pip's cache as it is on this machine: what the libraries add to a fresh clone's `make install`."""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEMAUDIT = [sys.executable, str(REPO / "memaudit.py")]
LIBRARIES = ("mem0ai", "graphiti", "llamaindex", "langmem", "agno", "cognee", "letta", "memos")
# The libraries in environments of their own (scripts/library_env.sh builds each).
ENVIRONMENTS = ("cognee", "letta", "memos")


def timed(command: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    return time.perf_counter() - start, done


def registered() -> list[str]:
    _, done = timed([*MEMAUDIT, "systems", "--json"], cwd=REPO)
    import json

    loads = {row["name"]: row["loads"] for row in json.loads(done.stdout)}
    return [name for name in LIBRARIES if loads.get(name)]


def contracts() -> None:
    with tempfile.TemporaryDirectory(prefix="memaudit-perf-libraries-") as scratch:
        for name in registered():
            seconds, done = timed([*MEMAUDIT, "--db", f"{scratch}/{name}.db", "check-adapter", name], cwd=REPO)
            verdict = "holds" if done.returncode == 0 else f"FAILS: {done.stderr.strip()[-200:]}"
            print(f"check-adapter {name:<11} {seconds:7.1f} s  contract {verdict}", flush=True)


def installs() -> None:
    with tempfile.TemporaryDirectory(prefix="memaudit-perf-install-") as scratch:
        venv = Path(scratch) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        subprocess.run([python, "-m", "pip", "install", "-q", "-e", str(REPO)], check=True, capture_output=True)
        seconds, done = timed([python, "-m", "pip", "install", "-q", "-e", f"{REPO}[agno]"])
        print(f"pip install the agno extra over the core: {seconds:.0f} s (exit {done.returncode})", flush=True)
        seconds, done = timed([python, "-m", "pip", "install", "-q", "-e", f"{REPO}[all]"])
        print(f"pip install the rest of the all extra: {seconds:.0f} s (exit {done.returncode})", flush=True)
        for name in ENVIRONMENTS:
            seconds, done = timed(["bash", "scripts/library_env.sh", python, name, str(Path(scratch) / name)], cwd=REPO)
            print(f"{name}'s own environment (scripts/library_env.sh): {seconds:.0f} s (exit {done.returncode})",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true", help="also time the extras' install")
    if parser.parse_args().install:
        installs()
    contracts()


if __name__ == "__main__":
    main()
