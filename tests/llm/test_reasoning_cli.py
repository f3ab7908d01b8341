"""The acceptance check for hosted reasoning models, through the CLI against a loopback server:
`rollout`, `score`, `attribute` and `replay` complete with `--model gpt-5.4-mini`, sending the
published temperature of every role when the server takes it, and adapting (and recording the
adaptation) when it refuses them as the hosted API does for some reasoning models."""
from __future__ import annotations

import sqlite3

import orjson

from memaudit.cli import main
from memaudit.testing import FakeOpenAI, serve
from memaudit.testing.fake_openai import schema_name
from tests.rollout.test_cli_inprocess import store_tiny_bench


def cli(url, db, *args, model="gpt-5.4-mini"):
    main(["--base-url", url, "--model", model, "--db", str(db), *args])


def roll_score_attribute_replay(url, db):
    cli(url, db, "rollout", "--bench", "tiny", "--systems", "longctx_full", "--users", "1", "--tasks", "2",
        "--max-turns", "2", "--quiet")
    cli(url, db, "score", "--mode", "dump_all")
    cli(url, db, "attribute", "--mode", "dump_all")
    cli(url, db, "replay")


def run_provenance(db) -> dict:
    with sqlite3.connect(db) as conn:
        return orjson.loads(conn.execute("SELECT config FROM runs").fetchone()[0])["provenance"]


def test_a_reasoning_model_that_takes_temperatures_is_sent_the_published_ones(tmp_path, capsys):
    db = tmp_path / "m.db"
    store_tiny_bench(db)
    fake = FakeOpenAI()
    with serve(fake) as url:
        roll_score_attribute_replay(url, db)
    assert capsys.readouterr().out.strip().endswith("identical")
    sent: dict = {}
    for body in fake.requests:
        sent.setdefault(schema_name(body) or "agent", set()).add(body["temperature"])
    assert sent["agent"] == {0.7} and sent["simulator"] == {0.85}
    assert sent["slot_fill"] == {0.0} and sent["recovery_judge"] == {0.0} and sent["pref_judge"] == {0.0}
    assert "adapted" not in run_provenance(db)


def test_rollout_score_attribute_replay_on_a_model_refusing_temperature(tmp_path, capsys):
    db = tmp_path / "m.db"
    store_tiny_bench(db)
    fake = FakeOpenAI(reasoning=True)
    with serve(fake) as url:
        roll_score_attribute_replay(url, db)
    assert capsys.readouterr().out.strip().endswith("identical")
    assert fake.requests and all("max_tokens" not in b for b in fake.requests)
    # The first request learned the refusal (one 400); every later one went without the temperature.
    assert fake.status_counts[400] == 1 and all("temperature" not in b for b in fake.requests[1:])
    with sqlite3.connect(db) as conn:
        requests = [orjson.loads(r[0]) for r in conn.execute("SELECT request FROM calls")]
        reasoning = conn.execute("SELECT MIN(reasoning_tokens) FROM calls").fetchone()[0]
    # The key and the record hold what was sent: the model's default temperature (null).
    assert requests and all(r["temperature"] is None for r in requests)
    assert reasoning > 0
    # The run says which roles ran without their temperature; what it asked for stays recorded.
    provenance = run_provenance(db)
    assert provenance["adapted"] == {role: ["temperature"] for role in ("agent", "memory", "memt_policy",
                                                                        "pref_judge", "simulator")}
    assert provenance["roles"]["agent"]["temperature"] == 0.7
    # Recorded after the rollout, the adaptation is no change of configuration: the run resumes.
    with serve(fake) as url:
        cli(url, db, "rollout", "--bench", "tiny", "--systems", "longctx_full", "--users", "1", "--tasks", "2",
            "--max-turns", "2", "--quiet")
    assert run_provenance(db)["adapted"] == provenance["adapted"]


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
