"""`memaudit rollout` in process against the loopback HTTP fake, on a benchmark stored by name."""
from __future__ import annotations

import anyio
import pytest

from memaudit.cli import main
from memaudit.store import open_store
from memaudit.testing.http_server import serve
from tests.rollout.conftest import make_bench


def store_tiny_bench(db) -> None:
    async def save():
        async with open_store(db) as store:
            await store.benchmarks.save(make_bench())
    anyio.run(save)


def rollout(url, db, *extra):
    main(["rollout", "--bench", "tiny", "--systems", "nomem", "--base-url", url, "--model", "fake",
          "--db", str(db), *extra])


def test_rollout_runs_and_prints_a_summary(tmp_path, capsys):
    db = tmp_path / "m.db"
    store_tiny_bench(db)
    with serve() as url:
        rollout(url, db, "--users", "user_002", "--tasks", "2", "--max-turns", "2", "--quiet")
    captured = capsys.readouterr()
    assert "nomem: 2 episodes" in captured.out
    assert "nomem user_002 task 1:" in captured.err and "user_001" not in captured.err


def test_live_progress_and_resume_is_a_no_op(tmp_path, capsys):
    db = tmp_path / "m.db"
    store_tiny_bench(db)
    with serve() as url:
        rollout(url, db, "--tasks", "1", "--max-turns", "2")
        rollout(url, db, "--tasks", "1", "--max-turns", "2")
    captured = capsys.readouterr()
    assert captured.out.count("nomem: 2 episodes") == 2
    assert "episodes" in captured.err  # the live table's header


def test_changed_config_and_bad_users_are_one_line_errors(tmp_path, capsys):
    db = tmp_path / "m.db"
    store_tiny_bench(db)
    with serve() as url:
        rollout(url, db, "--tasks", "1", "--max-turns", "2", "--quiet")
        with pytest.raises(SystemExit) as exit_info:
            rollout(url, db, "--tasks", "1", "--max-turns", "3", "--quiet")
        assert exit_info.value.code == 2
        assert "--tag" in capsys.readouterr().err
        with pytest.raises(SystemExit):
            rollout(url, db, "--users", "user_404", "--tag", "x", "--quiet")
        err = capsys.readouterr().err
        assert "user_404" in err and err.strip().count("\n") == 0


def test_a_resume_with_another_model_is_refused_in_one_line(tmp_path, capsys):
    db = tmp_path / "m.db"
    store_tiny_bench(db)
    with serve() as url:
        rollout(url, db, "--tasks", "1", "--max-turns", "2", "--quiet")
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main(["rollout", "--bench", "tiny", "--systems", "nomem", "--base-url", url, "--model", "other",
                  "--db", str(db), "--tasks", "1", "--max-turns", "2", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.count("\n") == 0
    assert "agent model (recorded 'fake', now 'other')" in err and "--tag" in err
