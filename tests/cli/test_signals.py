"""SIGINT and SIGTERM stop a command cleanly: its work is cancelled, the embedded server it started
is stopped, the store keeps only whole rows (a rerun resumes), and it exits 128 + the signal with
one line. Each signal is sent once the process has shown a known state (an episode in the store, a
line printed); every wait has a generous bound and nothing asserts elapsed time."""
from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from memaudit.bench.instances import SAMPLE_DIR
from memaudit.config import REPO_ROOT
from memaudit.demo import DemoSize
from memaudit.store import open_store
from memaudit.testing.http_server import serve
from tests.report import synthetic
from tests.rollout.test_cli import HeldAfter, count_episodes

MEMAUDIT = [sys.executable, str(REPO_ROOT / "memaudit.py")]
EPISODES = len(DemoSize().systems) * DemoSize().users * DemoSize().tasks
BOUND = 300  # seconds: a bound on a wait that a hang would exceed, never an expected duration


def wait_for(condition, proc: subprocess.Popen) -> None:
    """Poll until `condition()` holds; fails if the process ends first or the bound passes."""
    deadline = time.monotonic() + BOUND
    while not condition():
        assert proc.poll() is None, f"exited early with {proc.returncode}: {proc.stderr.read()}"
        assert time.monotonic() < deadline, "the process never reached the state the test waits for"
        time.sleep(0.05)


def stopped(proc: subprocess.Popen, signum: int) -> tuple[int, list[str]]:
    """Send `signum`; the exit code and the lines of stderr printed after it."""
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"still running {BOUND} s after {signal.Signals(signum).name}") from None
    return proc.returncode, err.splitlines()


def integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def whole_episodes(db: Path) -> list[tuple]:
    """(run, user, task, turns) of every stored episode, each checked whole: its turns all stored."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT e.run, e.user_id, e.task_idx, e.n_turns, (SELECT COUNT(*) FROM turns t WHERE t.run = e.run AND "
            "t.user_id = e.user_id AND t.task_idx = e.task_idx) FROM episodes e ORDER BY 1, 2, 3").fetchall()
    assert all(said == stored for *_, said, stored in rows), rows
    return [row[:4] for row in rows]


@pytest.mark.integration
@pytest.mark.skipif(not (SAMPLE_DIR / "benchmark_data" / "sample_tasks" / "user_003.json").is_file(),
                    reason="bundled sample not present")
def test_sigterm_stops_the_demo_mid_call_and_a_rerun_finishes_it(tmp_path):
    db = tmp_path / "demo.db"
    fake = HeldAfter(db, 1)  # answers until one episode is stored, then holds every request
    with serve(fake) as url:
        fake.armed = True
        demo = [*MEMAUDIT, "--db", str(db), "--base-url", url, "--model", "fake", "demo",
                "--report", str(tmp_path / "report")]
        proc = subprocess.Popen(demo, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        try:
            wait_for(lambda: count_episodes(db) >= 1, proc)  # the demo now waits on a held request
            code, err = stopped(proc, signal.SIGTERM)
        finally:
            fake.armed = False
            fake.release.set()
        assert code == 128 + signal.SIGTERM
        assert err[-1].startswith("memaudit: stopped by SIGTERM") and not any("Traceback" in e for e in err)
        assert integrity(db) == "ok"
        before = whole_episodes(db)
        assert 1 <= len(before) < EPISODES  # users run concurrently on an endpoint: a few may have finished

        again = subprocess.run(demo, capture_output=True, text=True, timeout=BOUND, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
    after = whole_episodes(db)
    assert len(after) == EPISODES and set(before) <= set(after)


def test_sigint_stops_view_serve_started_in_the_background(tmp_path):
    """A shell starts a background job with SIGINT ignored; `view --serve` still stops on it."""
    async def fill():
        async with open_store(tmp_path / "audit.db") as store:
            await synthetic.fill(store)
    anyio.run(fill)
    proc = subprocess.Popen([*MEMAUDIT, "--db", str(tmp_path / "audit.db"), "view", "--out", str(tmp_path / "out"),
                             "--serve"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert "served at http://127.0.0.1:" in proc.stdout.readline()  # printed once it listens
    finally:
        code, err = stopped(proc, signal.SIGINT)
    assert code == 128 + signal.SIGINT
    assert err == ["memaudit: stopped by SIGINT; work already finished is kept in the store"]


def test_sigint_stops_serve_fake_started_in_the_background():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([*MEMAUDIT, "serve", "--fake", "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert "serving the scripted fake model" in proc.stderr.readline()
    code, err = stopped(proc, signal.SIGINT)
    assert code == 128 + signal.SIGINT and len(err) == 1 and "stopped by SIGINT" in err[0]


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.mark.integration
def test_sigterm_stops_the_embedded_server_with_the_demo(tmp_path):
    """On the embedded model: the signal lands once the server has answered a request, while the demo
    goes on calling it; the demo stops it, exits with one line, and leaves no server process behind."""
    db = tmp_path / "demo.db"
    proc = subprocess.Popen([*MEMAUDIT, "--db", str(db), "demo", "--report", str(tmp_path / "report")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    log = tmp_path / "memaudit-server.log"
    wait_for(lambda: log.exists() and "POST /v1/chat/completions" in log.read_text(), proc)  # one answered
    servers = children(proc.pid)
    assert servers
    code, err = stopped(proc, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM and len(err) >= 1 and err[-1].startswith("memaudit: stopped by SIGTERM")
    assert not any("Traceback" in e for e in err)
    for pid in servers:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    assert integrity(db) == "ok"
