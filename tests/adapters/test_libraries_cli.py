"""The acceptance check of each deployed library (issue 32), once per library, as subprocesses
against the loopback HTTP fake: a 2-user, 2-task `rollout` keeps at least one memory item per user and records the
library's calls under `memory:<system>`, `score --mode both` scores both modes, and `replay` with
the server stopped prints `identical`. Slow (each process loads the library), hence integration."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from memaudit.adapters.registry import get_adapter
from memaudit.testing.fake_openai import FakeOpenAI
from memaudit.testing.http_server import serve
from tests.adapters.conftest import deployed_libraries, needs_library, script

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
# Long enough that LlamaIndex's short-term queue flushes into its blocks within two tasks.
SIMULATOR_TEXT = "I run along the river most mornings and my left knee aches after long hills. " * 12


def library_fake(system: str) -> FakeOpenAI:
    """The contract's fake speaking for `system`'s library: its answers are declared on the adapter,
    which the fake consults once the adapter's module is imported (here, not only in the CLI's process)."""
    get_adapter(system)
    return script(FakeOpenAI())


def run_memaudit(db: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "memaudit.py"), "--db", str(db), "--base-url", url,
                           "--model", "fake", *args], capture_output=True, text=True, timeout=900)


def memaudit(db: Path, url: str, *args: str) -> str:
    done = run_memaudit(db, url, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("system", deployed_libraries())
def test_two_users_two_tasks_rollout_score_and_replay(system, tmp_path):
    db = tmp_path / f"{system}.db"
    fake = library_fake(system).on("simulator", lambda body: {"feedback_type": "followup", "text": SIMULATOR_TEXT})
    with serve(fake) as url:
        out = memaudit(db, url, "rollout", "--bench", "sample", "--systems", system, "--users", "2",
                       "--tasks", "2", "--max-turns", "2", "--quiet")
        assert f"{system}: 4 episodes" in out
        # The fake answers every call as asked: a lost write is the adapter's fault, and one a replay
        # does not lose again ends in a cache miss, far from its cause.
        assert "memory writes lost" not in out, out
        out = memaudit(db, url, "score", "--mode", "both", "--k", "3")
        assert f"{system} dump_all" in out and f"{system} retrieve" in out
    with sqlite3.connect(db) as con:
        last = con.execute("SELECT user_id, items FROM snapshots s WHERE task_idx = "
                           "(SELECT MAX(task_idx) FROM snapshots t WHERE t.user_id = s.user_id)").fetchall()
        calls = con.execute("SELECT COUNT(*) FROM calls WHERE role = ?", (f"memory:{system}",)).fetchone()[0]
    assert len(last) == 2 and all(orjson.loads(items) for _, items in last)
    assert calls > 0
    assert memaudit(db, url, "replay").strip().endswith("identical")


@pytest.mark.parametrize("system", [pytest.param(s, marks=needs_library(s)) for s in ("agno", "langmem", "letta")])
def test_a_rollout_on_a_server_that_ignores_tools_stops_with_one_line(system, tmp_path):
    """Never a memory left silently empty by a server that drops `tools` (mem0ai/mem0#4175)."""
    fake = library_fake(system)
    fake.ignore_tools = True
    with serve(fake) as url:
        done = run_memaudit(tmp_path / f"{system}.db", url, "rollout", "--bench", "sample", "--systems", system,
                            "--users", "1", "--tasks", "1", "--max-turns", "1", "--quiet")
    assert done.returncode != 0
    said = done.stderr.strip().splitlines()
    assert len(said) == 1 and f"memory:{system}" in said[0] and "ignores `tools`" in said[0], done.stderr
