"""The acceptance check of `memaudit rollout`, as subprocesses against the loopback HTTP fake:
killed with SIGKILL mid-run and started again, it completes with 24 episodes, its rows equal an
uninterrupted run's, and `memaudit export` writes byte-identical files. Slow (each process loads
the real sentence encoder), hence marked integration."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memaudit.bench.instances import SAMPLE_DIR
from memaudit.testing.http_server import serve
from memaudit.testing.fake_openai import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]
ARGS = ["rollout", "--bench", "sample", "--systems", "nomem,longctx_full", "--users", "3", "--tasks", "4",
        "--max-turns", "3", "--model", "fake", "--quiet"]

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not (SAMPLE_DIR / "benchmark_data" / "sample_tasks" / "user_003.json").is_file(),
                                 reason="bundled sample not present")]


def command(url: str, db: Path) -> list[str]:
    return [sys.executable, str(REPO / "memaudit.py"), *ARGS, "--base-url", url, "--db", str(db)]


def export(db: Path, out: Path) -> dict[str, bytes]:
    done = subprocess.run([sys.executable, str(REPO / "memaudit.py"), "export", "--runs", "nomem,longctx_full",
                           "--out", str(out), "--db", str(db)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def count_episodes(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def artifacts(db: Path) -> dict:
    with sqlite3.connect(db) as conn:
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3, 4").fetchall()
                for table in ("episodes", "turns", "snapshots")}


class HeldAfter(FakeOpenAI):
    """Answers until `db` holds `episodes` episodes, then holds every later request until released:
    the victim stops mid-run whatever the scheduling, so the kill always lands mid-run."""

    def __init__(self, db: Path, episodes: int):
        super().__init__()
        self.db, self.episodes, self.release = db, episodes, threading.Event()
        self.armed = False

    def reply(self, path, authorization, content):
        if self.armed and count_episodes(self.db) >= self.episodes:
            self.release.wait()  # blocks the server's loop: no request is answered until then
        return super().reply(path, authorization, content)


def test_killed_rollout_resumes_to_the_same_result(tmp_path):
    whole, partial = tmp_path / "whole.db", tmp_path / "partial.db"
    # Replies depend on how much history the assistant saw, so a wrongly restored memory shows.
    fake = HeldAfter(partial, 4).on_text(lambda body: f"A plan written after reading {len(body['messages'])} messages.")
    with serve(fake, latency=0.02) as url:
        done = subprocess.run(command(url, whole), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "nomem: 12 episodes" in done.stdout and "longctx_full: 12 episodes" in done.stdout

        fake.armed = True
        victim = subprocess.Popen(command(url, partial), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while count_episodes(partial) < 4 and victim.poll() is None:
                time.sleep(0.05)
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait()
        finally:
            fake.armed = False
            fake.release.set()
        interrupted = count_episodes(partial)
        assert 4 <= interrupted < 24

        again = subprocess.run(command(url, partial), capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert count_episodes(partial) == 24
        assert artifacts(partial) == artifacts(whole)
    exported = export(partial, tmp_path / "partial_export")
    assert any(name.startswith("history/longctx_full/") for name in exported)
    assert any(name.startswith("memory/longctx_full/") for name in exported)
    assert exported == export(whole, tmp_path / "whole_export")
