"""The acceptance check for hosted reasoning models, through the CLI against a loopback server that
refuses `max_tokens` and non-default sampling parameters exactly as the hosted API does:
`rollout`, `score`, `attribute` and `replay` complete with `--model gpt-5.4-mini`."""
from __future__ import annotations

import sqlite3

import orjson
import pytest

from memaudit.cli import main
from memaudit.testing import FakeOpenAI, serve
from tests.rollout.test_cli_inprocess import store_tiny_bench


def cli(url, db, *args, model="gpt-5.4-mini"):
    main(["--base-url", url, "--model", model, "--db", str(db), *args])


def test_rollout_score_attribute_replay_on_a_reasoning_model(tmp_path, capsys):
    db = tmp_path / "m.db"
    store_tiny_bench(db)
    fake = FakeOpenAI(reasoning=True)
    with serve(fake) as url:
        cli(url, db, "rollout", "--bench", "tiny", "--systems", "longctx_full", "--users", "1", "--tasks", "2",
            "--max-turns", "2", "--quiet")
        cli(url, db, "score", "--mode", "dump_all")
        cli(url, db, "attribute", "--mode", "dump_all")
        cli(url, db, "replay")
    assert capsys.readouterr().out.strip().endswith("identical")
    assert fake.requests and all("max_tokens" not in b and "temperature" not in b for b in fake.requests)
    assert fake.status_counts[400] == 0  # recognised by its name: nothing was refused
    with sqlite3.connect(db) as conn:
        requests = [orjson.loads(r[0]) for r in conn.execute("SELECT request FROM calls")]
        reasoning = conn.execute("SELECT MIN(reasoning_tokens) FROM calls").fetchone()[0]
    # The key and the record hold what was sent: the model's default temperature (null).
    assert requests and all(r["temperature"] is None for r in requests)
    assert reasoning > 0


def test_a_model_not_known_by_name_is_learned_from_its_400_and_remembered(tmp_path, capsys):
    """Spoken to in the vllm dialect (which sends `max_tokens`), it refuses that, then the temperature."""
    db = tmp_path / "m.db"
    store_tiny_bench(db)
    fake = FakeOpenAI(reasoning=True)
    with serve(fake) as url:
        def run(*args):
            main(["--base-url", url, "--model", "house-reasoner", "--backend", "vllm", "--db", str(db), *args])
        run("rollout", "--bench", "tiny", "--systems", "nomem", "--users", "1", "--tasks", "1", "--max-turns", "2",
            "--quiet")
        assert fake.status_counts[400] >= 1
        refused = fake.status_counts[400]
        run("rollout", "--bench", "tiny", "--systems", "nomem", "--users", "1", "--tasks", "2", "--max-turns", "2",
            "--quiet", "--tag", "more")
        run("replay")
    # A new process (here: a new command) knows the refusal from the store and is not refused again.
    assert fake.status_counts[400] == refused
    assert capsys.readouterr().out.strip().endswith("identical")
    with sqlite3.connect(db) as conn:
        assert set(conn.execute("SELECT model, backend, param FROM param_refusals")) >= {
            ("house-reasoner", "vllm", "temperature")}
        assert conn.execute("SELECT COUNT(*) FROM calls WHERE ok = 0").fetchone()[0] == 0
