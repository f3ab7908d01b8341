"""Issue 42, finding 1: a server that copies the Authorization header into every 200 answer (its
text, each prose string of a JSON answer, tool arguments). Through rollout, score and view of
`longctx_full` and of `langmem` (whose memories go back into its later prompts), the key is in no
file of the store's folder and of the report, and in no output; the command says once how many
times it was removed; replay prints `identical` (the cache holds the cleaned answers)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memaudit.testing.fake_openai import FakeOpenAI
from memaudit.testing.http_server import serve
from tests.adapters.conftest import needs_library, script

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-echoed-by-a-careless-proxy-0123456789"


def memaudit(db: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(REPO / "memaudit.py"), "--db", str(db), "--base-url", url,
                           "--model", "fake", *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "OPENAI_API_KEY": KEY})
    assert done.returncode == 0, done.stderr
    return done


def files_holding(folder: Path, text: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.integration
@pytest.mark.parametrize("system", ["longctx_full", pytest.param("langmem", marks=needs_library("langmem"))])
def test_an_echoed_key_is_kept_nowhere(system, tmp_path):
    fake = script(FakeOpenAI())
    fake.api_key, fake.echo_key = KEY, True
    db = tmp_path / "store" / "m.db"
    db.parent.mkdir()
    with serve(fake) as url:
        said = [memaudit(db, url, "rollout", "--bench", "sample", "--systems", system, "--users", "1",
                         "--tasks", "2", "--max-turns", "2", "--quiet"),
                memaudit(db, url, "score", "--mode", "both", "--k", "3"),
                memaudit(db, url, "view", "--out", str(tmp_path / "report"))]
    assert "echoed the API key" in said[0].stderr and said[0].stderr.count("echoed the API key") == 1
    assert all(KEY not in done.stdout + done.stderr for done in said)
    assert files_holding(db.parent, KEY) == [] and files_holding(tmp_path / "report", KEY) == []
    # the answers were kept, only the key left them
    assert files_holding(db.parent, "(sent with Bearer ***)")
    assert memaudit(db, url, "replay").stdout.strip().endswith("identical")
