"""`import-release` writes into a copy beside the store and swaps it in (memaudit/store/sidefile.py):
a failed or killed import leaves the store byte for byte as it was, and the next import cleans up."""
from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson

from memaudit.store.sidefile import side_path
from memaudit.testing.release_fixture import write_release
from tests.release.test_hostile_release import memaudit, one_line_error

REPO = Path(__file__).resolve().parents[2]


def store_bytes(db: Path) -> bytes:
    return db.read_bytes()


def runs_in(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT run FROM runs ORDER BY run")]


def first_store(tmp_path: Path) -> Path:
    db = tmp_path / "s.db"
    write_release(tmp_path / "first", users=2, runs=("nomem_pooled_50",))
    assert memaudit("import-release", tmp_path / "first", "--db", db) == 0
    return db


def test_a_failed_import_leaves_the_store_as_it_was(tmp_path, capsys):
    db = first_store(tmp_path)
    before = store_bytes(db)
    root = write_release(tmp_path / "second", users=3, runs=("amem_pooled_50", "mem0_pooled_50"), seed=1)
    (root / "memory/mem0_pooled_50/user_003/memories.json").write_bytes(orjson.dumps({"memories": "damaged"}))
    capsys.readouterr()
    assert memaudit("import-release", root, "--db", db, "--name", "second") == 2
    assert "memories" in one_line_error(capsys)
    assert store_bytes(db) == before and runs_in(db) == ["nomem_pooled_50"]
    assert not side_path(db).exists()


def test_a_killed_import_leaves_the_store_as_it_was_and_the_next_one_cleans_up(tmp_path):
    db = first_store(tmp_path)
    before = store_bytes(db)
    root = write_release(tmp_path / "second", users=20, runs=("amem_pooled_50", "mem0_pooled_50"), seed=1,
                         turns=4, reply_chars=400)
    args = [sys.executable, str(REPO / "memaudit.py"), "import-release", str(root), "--db", str(db), "--name", "s2"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None and not side_path(db).exists():
        time.sleep(0.005)  # until the import writes beside the store: then kill it wherever it is
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if proc.returncode == -signal.SIGKILL:
        assert store_bytes(db) == before and runs_in(db) == ["nomem_pooled_50"]
    else:  # it finished before the kill landed: then it is all there
        assert runs_in(db) == ["amem_pooled_50", "mem0_pooled_50", "nomem_pooled_50"]
        return
    assert subprocess.run(args, capture_output=True).returncode == 0
    assert runs_in(db) == ["amem_pooled_50", "mem0_pooled_50", "nomem_pooled_50"]
    assert not side_path(db).exists()
