"""A newcomer's mistakes and a hostile environment end in one line and a non-zero exit, never a
traceback or a silent exit 0 that did nothing; read-only or refused commands create no store."""
from __future__ import annotations

import socket
import sqlite3

import anyio
import pytest

from memaudit.cli import main
from memaudit.config import load_settings
from memaudit.errors import BadInput
from memaudit.store import open_store
from tests.rollout.conftest import make_bench

DEAD = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]


def fails_in_one_line(capsys, *args) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    assert exit_info.value.code not in (0, None)
    err = capsys.readouterr().err.strip()
    assert err.startswith("memaudit: error:") and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("args", [
    ["score", "--mode", "dump_all"], ["attribute", "--mode", "dump_all"], ["tables"], ["replay"],
    ["bench", "list"], ["view", "--out", "report"], ["export", "--out", "release"], ["calls"],
    ["calls", "--embeddings"], ["cache", "stats"],
])
def test_commands_that_read_a_store_refuse_a_missing_one_and_create_none(tmp_path, capsys, args):
    db = tmp_path / "a.db"
    assert "no store here" in fails_in_one_line(capsys, *args, "--db", str(db), *DEAD)
    assert not db.exists() and not (tmp_path / "report").exists() and not (tmp_path / "release").exists()


@pytest.mark.parametrize("args", [["score", "--mode", "dump_all"], ["attribute", "--mode", "both"], ["tables"],
                                  ["replay"]])
def test_commands_on_an_empty_store_say_there_is_nothing_instead_of_exit_0(tmp_path, capsys, args):
    db = tmp_path / "empty.db"
    anyio.run(_save_bench, db)
    err = fails_in_one_line(capsys, *args, "--db", str(db), *DEAD)
    assert "no runs" in err or "nothing to replay" in err


async def _save_bench(db):
    async with open_store(db) as store:
        await store.benchmarks.save(make_bench(n_users=1, n_tasks=1))


def test_a_refused_rollout_leaves_no_store_file(tmp_path, capsys):
    db = tmp_path / "r.db"
    err = fails_in_one_line(capsys, "rollout", "--bench", "sample", "--systems", "nosuch", "--db", str(db), *DEAD)
    assert "unknown memory system 'nosuch'" in err and not db.exists()
    assert not (tmp_path / "r.db-wal").exists()


def test_a_rollout_failing_before_its_first_episode_leaves_no_run_row(tmp_path, capsys):
    from memaudit.testing import FakeOpenAI, serve

    db = tmp_path / "r.db"
    anyio.run(_save_bench, db)
    refusing = FakeOpenAI()
    refusing.api_key = "the-right-key"  # every request gets a 401: the first call ends the command
    with serve(refusing) as url:
        err = fails_in_one_line(capsys, "rollout", "--bench", "tiny", "--systems", "nomem", "--quiet", "--db",
                                str(db), "--base-url", url, "--model", "m")
    assert "401" in err or "key" in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_db_naming_a_folder_or_a_path_under_a_file(tmp_path, capsys):
    assert "is a directory" in fails_in_one_line(capsys, "bench", "list", "--db", str(tmp_path))
    (tmp_path / "afile").write_text("x")
    fails_in_one_line(capsys, "rollout", "--bench", "sample", "--systems", "nomem", "--db",
                      str(tmp_path / "afile" / "s.db"), *DEAD)


def test_a_damaged_store_is_one_line(tmp_path, capsys):
    db = tmp_path / "s.db"
    anyio.run(_save_bench, db)
    data = bytearray(db.read_bytes())
    data[4096:8192] = b"\xff" * 4096  # a corrupted page past the header
    db.write_bytes(bytes(data))
    err = fails_in_one_line(capsys, "bench", "list", "--db", str(db))
    assert "damaged" in err or "not a memaudit store" in err or "malformed" in err


def test_view_and_export_onto_a_path_under_a_file(tmp_path, capsys):
    from tests.scoring.recorded import record, runtime, script
    from memaudit.testing.fake_openai import FakeOpenAI

    settings = load_settings(db=tmp_path / "s.db", base_url="http://fake.test/v1", model="m", env={})

    async def recorded():
        fake = script(FakeOpenAI())
        async with runtime(settings, fake) as rt:
            await record(rt, ("nomem",), users=1, tasks=1)
    anyio.run(recorded)
    (tmp_path / "afile").write_text("x")
    for command in ("view", "export"):
        err = fails_in_one_line(capsys, command, "--out", str(tmp_path / "afile" / "sub"), "--db", str(settings.db))
        assert "afile" in err


@pytest.mark.parametrize("args, words", [
    (["score", "--mode", "dump_all", "--k", "99999999999999999999999"], "--k values"),
    (["serve", "--model-path", "/etc/passwd"], "not a GGUF"),
])
def test_out_of_range_or_wrong_values(tmp_path, capsys, args, words):
    assert words in fails_in_one_line(capsys, *args, "--db", str(tmp_path / "s.db"))


def test_serve_refuses_a_port_out_of_range_or_in_use(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--fake", "--port", "99999"])
    assert exit_info.value.code == 2 and "99999" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = fails_in_one_line(capsys, "serve", "--fake", "--port", str(port))
    assert f"port {port}" in err and "not free" in err and "serving" not in err


@pytest.mark.parametrize("text, field", [
    ('[default]\ntemperature = "hot"\n', "default.temperature"),
    ('[default]\ncontext_window = -5\n', "default.context_window"),
    ('[default]\ncontext_window = "big"\n', "default.context_window"),
    ('[default]\nmax_tokens = "many"\n', "default.max_tokens"),
    ('[default]\ncolour = "blue"\n', "default.colour"),
    ('roles = 5\n', "roles"),
    ('[roles.agent]\ntemperature = true\n', "roles.agent.temperature"),
    ('[roles.agent]\nbase_url = 3\n', "roles.agent.base_url"),
    ('[default]\ntimeout = 0\n', "default.timeout"),
    ('colour = "blue"\n', "colour"),
])
def test_every_config_key_and_value_is_checked(tmp_path, text, field):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(BadInput) as info:
        load_settings(config=path, env={})
    assert str(path) in str(info.value) and f"field {field}:" in str(info.value)


def test_a_bad_config_value_is_one_line_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text('[default]\ncontext_window = "big"\n')
    err = fails_in_one_line(capsys, "rollout", "--bench", "sample", "--systems", "nomem", "--config", str(path),
                            "--db", str(tmp_path / "s.db"))
    assert "default.context_window" in err and not (tmp_path / "s.db").exists()


def test_default_sampling_keys_apply_to_every_role(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[default]\ntemperature = 0.2\n[roles.agent]\ntemperature = 0.9\n')
    settings = load_settings(config=path, env={})
    assert settings.role("simulator").temperature == 0.2 and settings.role("agent").temperature == 0.9


def test_the_client_timeout_is_a_setting(tmp_path, monkeypatch):
    path = tmp_path / "c.toml"
    path.write_text("[default]\ntimeout = 30\n")
    assert load_settings(env={}).timeout == 600
    assert load_settings(config=path, env={}).timeout == 30
    assert load_settings(config=path, env={"MEMAUDIT_TIMEOUT": "12.5"}).timeout == 12.5
    assert load_settings(config=path, timeout=5, env={}).timeout == 5
    with pytest.raises(BadInput, match="timeout"):
        load_settings(timeout=-1, env={})
