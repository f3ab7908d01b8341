"""Benchmark for the README's one-minute tour (issue 21): the newcomer's path with no build and no
key, timed as users run it — each step a `memaudit` CLI process, the model `memaudit serve --fake`
on real loopback HTTP.

    .venv/bin/python perf/fake_tour.py

    .venv/bin/python perf/fake_tour.py --install

Prints the wall time of every step and the total (after the install: about half a minute), then checks
that a bare `memaudit replay`, with the server stopped, prints `identical`. It also prints how long
a command takes to give up on a hung endpoint with `--timeout 1` (the setting that replaces the
default ≈ 70 minutes: 600 s × 7 attempts).

With `--install` it first does the tour's install as the README says, in a fresh virtualenv in a
scratch copy of the checkout (`python3 -m venv .venv && .venv/bin/pip install -q -e .`, pip's own
cache and configuration as they are on this machine), prints its wall time, the virtualenv's size
and whether torch came with it (the light install: it must not), and runs the tour with that
install's `memaudit`.
"""
from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEMAUDIT = [sys.executable, str(REPO / "memaudit.py")]
CHECKOUT = ("memaudit", "adapters", "prompts", "db", "setup.py", "pyproject.toml", "README.md", "memaudit.py")
TOUR = [
    ["rollout", "--bench", "sample", "--systems", "nomem,bm25", "--users", "2", "--tasks", "2",
     "--max-turns", "3", "--quiet"],
    ["score", "--mode", "both", "--dims", "targeted"],
    ["tables", "--only", "table2"],
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step(memaudit: list[str], args: list[str], db: Path, extra: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([*memaudit, *args, "--db", str(db), *extra], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.strip()}")
    return elapsed, done.stdout


def tour(folder: Path, memaudit: list[str]) -> None:
    db, port = folder / "tour.db", free_port()
    start = time.perf_counter()
    server = subprocess.Popen([*memaudit, "serve", "--fake", "--port", str(port)], stderr=subprocess.PIPE, text=True)
    server.stderr.readline()  # "serving the scripted fake model on …"
    print(f"serve --fake ready: {time.perf_counter() - start:6.2f} s")
    flags = ["--base-url", f"http://127.0.0.1:{port}/v1", "--model", "fake"]
    try:
        for args in TOUR:
            elapsed, _ = step(memaudit, args, db, flags)
            print(f"{' '.join(args[:1]):<14}{elapsed:6.2f} s")
    finally:
        server.terminate()
        server.wait()
    elapsed, out = step(memaudit, ["replay"], db, [])
    print(f"{'replay':<14}{elapsed:6.2f} s   -> {out.strip()}")
    print(f"{'tour total':<14}{time.perf_counter() - start:6.2f} s")


def hung_endpoint(folder: Path) -> None:
    """A server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held = []
    threading.Thread(target=lambda: [held.append(listener.accept()) for _ in iter(int, 1)], daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    start = time.perf_counter()
    done = subprocess.run([*MEMAUDIT, "rollout", "--bench", "sample", "--systems", "nomem", "--users", "1",
                           "--tasks", "1", "--quiet", "--db", str(folder / "hung.db"), "--base-url", url,
                           "--model", "m", "--timeout", "1"], capture_output=True, text=True)
    print(f"hung endpoint, --timeout 1: gave up after {time.perf_counter() - start:6.2f} s "
          f"(exit {done.returncode}: {done.stderr.strip().splitlines()[-1][:100]})")


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def light_install(folder: Path) -> list[str]:
    """The README's install in a fresh copy of the checkout; the command that runs its memaudit."""
    checkout = folder / "checkout"
    checkout.mkdir()
    for name in CHECKOUT:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, checkout / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                              if (REPO / name).is_dir() else {}))
    start = time.perf_counter()
    subprocess.run("python3 -m venv .venv && .venv/bin/pip install -q -e .", shell=True, cwd=checkout, check=True)
    elapsed = time.perf_counter() - start
    python = checkout / ".venv" / "bin" / "python"
    torch = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('torch') is not None)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    print(f"install       {elapsed:6.1f} s   venv {size_mb(checkout / '.venv'):.0f} MB   torch installed: {torch}")
    return [str(python), str(checkout / "memaudit.py")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true", help="time the README's install first, in a fresh venv")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tour(Path(folder), light_install(Path(folder)) if args.install else MEMAUDIT)
        hung_endpoint(Path(folder))


if __name__ == "__main__":
    main()
