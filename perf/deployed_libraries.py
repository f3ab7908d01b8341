"""Benchmark for issue 32's install and test figures: what the deployed memory libraries cost.

    .venv/bin/python perf/deployed_libraries.py              # per library: check-adapter wall time
    .venv/bin/python perf/deployed_libraries.py --install    # also: the extras' install time

For each deployed library registered here (adapters/deployed.py `registered_libraries`) it runs
`memaudit check-adapter NAME` as users run it (a CLI process; the library's calls over loopback
HTTP through the recording proxy; those with an environment of their own in its worker processes) and prints
its wall time: the part of `make test` each library's contract costs. With `--install` it first
times, in a scratch virtualenv, `pip install` of the `agno` extra and then of the rest of the `all`
extra on top of memaudit's core, and the build of every declared library environment
(scripts/library_env.sh), with pip's cache as it is on this machine: what the libraries add to a
fresh clone's `make install`."""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memaudit.adapters.deployed import registered_libraries  # noqa: E402 (this checkout's)
from memaudit.adapters.environment import declared_environments  # noqa: E402

MEMAUDIT = [sys.executable, str(REPO / "memaudit.py")]


def timed(command: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    return time.perf_counter() - start, done


def contracts() -> None:
    with tempfile.TemporaryDirectory(prefix="memaudit-perf-libraries-") as scratch:
        for name in registered_libraries():
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
        for environment in declared_environments():
            seconds, done = timed(["bash", "scripts/library_env.sh", python, environment,
                                   str(Path(scratch) / environment)], cwd=REPO)
            print(f"{environment}'s own environment (scripts/library_env.sh): {seconds:.0f} s "
                  f"(exit {done.returncode})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true", help="also time the extras' install")
    if parser.parse_args().install:
        installs()
    contracts()


if __name__ == "__main__":
    main()
