"""import-release and export through the CLI entry point."""
from __future__ import annotations

from tests.cli_main import memaudit
from memaudit.testing.release_fixture import write_release



def test_import_release_and_export(tmp_path, capsys):
    root = write_release(tmp_path / "pub", users=1, runs=("amem_pooled_50",))
    db = str(tmp_path / "s.db")
    assert memaudit("import-release", str(root), "--db", db) == 0
    assert "imported 1 run(s): amem_pooled_50" in capsys.readouterr().out
    assert memaudit("export", "--runs", "amem_pooled_50", "--out", str(tmp_path / "out"), "--db", db) == 0
    assert (tmp_path / "out/history/amem_pooled_50/user_001/episode_31.json").is_file()
