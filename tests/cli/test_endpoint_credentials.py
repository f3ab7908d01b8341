"""A wrong API key against a server whose 401 echoes the Authorization header: the command fails in
one line, the key is in no output and in no file of the store's directory, nothing is recorded,
and once the key is fixed the same command succeeds without `--cache refresh`."""
from __future__ import annotations

import anyio
import pytest

from memaudit.cli import main
from memaudit.store import open_store
from memaudit.testing.fake_openai import FakeOpenAI
from memaudit.testing.http_server import serve
from tests.rollout.conftest import make_bench

WRONG_KEY = "sk-wrong-key-echoed-by-the-server-1234"
RIGHT_KEY = "sk-right-key-of-this-server-5678"


def rollout(url, db) -> None:
    main(["rollout", "--bench", "tiny", "--systems", "nomem", "--tasks", "1", "--max-turns", "2", "--quiet",
          "--base-url", url, "--model", "fake", "--db", str(db)])


def test_a_wrong_key_leaks_nowhere_and_a_fixed_key_works(tmp_path, capsys, monkeypatch):
    db = tmp_path / "store" / "m.db"

    async def save():
        async with open_store(db) as store:
            await store.benchmarks.save(make_bench())
    anyio.run(save)
    fake = FakeOpenAI()
    fake.api_key = RIGHT_KEY
    with serve(fake) as url:
        monkeypatch.setenv("OPENAI_API_KEY", WRONG_KEY)
        with pytest.raises(SystemExit) as exit_info:
            rollout(url, db)
        assert exit_info.value.code == 2
        failed = capsys.readouterr()
        assert fake.status_counts[401] >= 1
        assert failed.err.count("\n") == 1 and "error 401" in failed.err and "Bearer ***" in failed.err

        monkeypatch.setenv("OPENAI_API_KEY", RIGHT_KEY)
        rollout(url, db)
        fixed = capsys.readouterr()
    assert "nomem: 2 episodes" in fixed.out
    for text in (failed.out, failed.err, fixed.out, fixed.err):
        assert WRONG_KEY not in text and RIGHT_KEY not in text
    files = [p for p in db.parent.rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        assert WRONG_KEY.encode() not in data and RIGHT_KEY.encode() not in data, path
