"""The bench commands through the CLI entry point: output, exit codes, one-line errors."""
from __future__ import annotations

import orjson
import pytest

from memaudit.bench.instances import SAMPLE_DIR
from tests.cli_main import memaudit
from memaudit.testing.release_fixture import BANKS, write_release

SAMPLE_READY = (SAMPLE_DIR / "benchmark_data").is_dir()



def test_validate_prints_every_problem_and_fails(tmp_path, capsys):
    root = write_release(tmp_path / "rel", users=2)
    assert memaudit("bench", "validate", str(root)) == 0
    assert capsys.readouterr().out.strip() == f"{root}: ok"
    data = orjson.loads((root / BANKS).read_bytes())
    data["users"][0]["memory_bank"]["skill_memory"].pop()
    data["users"][1]["memory_bank"]["knowledge_memory"].pop()
    (root / BANKS).write_bytes(orjson.dumps(data))
    assert memaudit("bench", "validate", str(root)) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert any("user user_001: memory_bank.skill_memory: 6 entries" in line for line in lines)
    assert any("user user_002: memory_bank.knowledge_memory: 6 entries" in line for line in lines)
    assert "problem(s)" in captured.err


def test_import_list_and_refused_import(tmp_path, capsys):
    root = write_release(tmp_path / "rel", users=2)
    db = str(tmp_path / "s.db")
    assert memaudit("bench", "import", str(root), "--name", "fx", "--db", db) == 0
    assert memaudit("bench", "import", str(root), "--name", "fx", "--db", db) == 2
    assert "already exists" in capsys.readouterr().err
    (root / "benchmark_data/CustomTasksPooledFinal/user_002.json").unlink()
    assert memaudit("bench", "import", str(root), "--name", "broken", "--db", db) == 2
    err = capsys.readouterr().err
    assert err.startswith("memaudit: error:") and "user_002" in err and len(err.strip().splitlines()) == 1
    assert memaudit("bench", "list", "--json", "--db", db) == 0
    assert orjson.loads(capsys.readouterr().out) == [{"name": "fx", "users": 2, "tasks": 62}]


@pytest.mark.skipif(not SAMPLE_READY, reason="bundled sample not present yet")
def test_bundled_sample_validates(capsys):
    assert memaudit("bench", "validate", "sample") == 0
    assert capsys.readouterr().out.strip() == "sample: ok"
