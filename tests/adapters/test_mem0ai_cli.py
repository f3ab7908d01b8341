"""The acceptance check of the mem0ai system, as subprocesses against the loopback HTTP fake:
`rollout --systems mem0ai`, `score --mode both`, then `replay` with the server stopped prints
`identical`, and `cache stats` lists the library's calls under `memory:mem0ai`. Slow (each process
loads the real sentence encoder), hence marked integration."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memaudit.testing.fake_openai import FakeOpenAI
from memaudit.testing.http_server import serve
from tests.adapters.conftest import needs_mem0ai, script

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, needs_mem0ai]


def memaudit(db: Path, url: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(REPO / "memaudit.py"), "--db", str(db), "--base-url", url,
                           "--model", "fake", *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_rollout_score_and_replay_of_the_upstream_library(tmp_path):
    db = tmp_path / "mem0ai.db"
    with serve(script(FakeOpenAI())) as url:
        out = memaudit(db, url, "rollout", "--bench", "sample", "--systems", "mem0ai", "--users", "1",
                       "--tasks", "2", "--max-turns", "2", "--quiet")
        assert "mem0ai: 2 episodes" in out
        out = memaudit(db, url, "score", "--mode", "both", "--k", "3")
        assert "mem0ai dump_all" in out and "mem0ai retrieve" in out
    assert memaudit(db, url, "replay").strip().endswith("identical")
    assert "memory:mem0ai" in memaudit(db, url, "cache", "stats")
