"""The acceptance run of the utilization stage, as subprocesses against the loopback HTTP fake:
the bundled sample through rollout, `score --mode retrieve`, `utilization` and `tables --format
json`; every scored target of each memory run lands in exactly one of the four counts and
`replay` prints identical. Slow (each process loads the real sentence encoder): integration."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from memaudit.testing import FakeOpenAI, serve

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def test_sample_through_utilization_tables_and_replay(tmp_path):
    fake = FakeOpenAI().on_text(lambda body: f"A plan after {len(body['messages'])} messages and "
                                             f"{len(body['messages'][-1]['content'])} characters of prompt.")
    with serve(fake) as url:
        def memaudit(*args) -> str:
            done = subprocess.run([sys.executable, str(REPO / "memaudit.py"), *args, "--base-url", url,
                                   "--model", "fake", "--db", str(tmp_path / "m.db")],
                                  capture_output=True, text=True, timeout=1200)
            assert done.returncode == 0, done.stderr
            return done.stdout

        memaudit("rollout", "--bench", "sample", "--systems", "nomem,longctx_full", "--tasks", "6",
                 "--max-turns", "2", "--quiet")
        memaudit("score", "--mode", "retrieve")
        memaudit("utilization")
        tables = orjson.loads(memaudit("tables", "--format", "json", "--bootstrap", "200"))
        assert memaudit("replay").strip() == "identical"
    rows = {r["run"]: r for r in tables["utilization"]}
    assert sorted(rows) == ["longctx_full"]  # nomem has no retrieve mode
    scored = {r["run"]: r["users"] for r in tables["table3"] if r["mode"] == "retrieve" and r["users"]}
    for run, row in rows.items():
        assert scored[run] == 3 and row["targets"] == 93 and row["failed"] == 0
        assert row["kp_ap"] + row["kp_af"] + row["kf_ap"] + row["kf_af"] == row["targets"]
        assert sum(b["targets"] for b in row["per_category"].values()) == 93
    carry = {r["run"]: r for r in tables["carryover"]}
    assert carry["longctx_full"]["prefs"] == 3  # one preference per user is targeted in the first six tasks
    assert carry["longctx_full"]["carryover_vs_nomem"]["nomem"] == "nomem"
