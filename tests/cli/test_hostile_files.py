"""Files a user points memaudit at are refused in one line within seconds, never followed into a
hang, read whole past a limit or turned into a traceback, and a refusal writes nothing (issue 36
item 7): `batch collect --from`, `cost --prices`, `merge --into`, and a base URL that is no HTTP URL."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from dataclasses import replace

import anyio
import orjson
import pytest

from memaudit.cli import main
from memaudit.llm import batch as batch_module
from memaudit.llm.batch import BatchCollector, BatchPending, submit
from memaudit.roles import ROLE_SPECS
from memaudit.runtime import open_runtime
from memaudit.store import open_store
from memaudit.testing.fake_openai import FakeOpenAI, completion

SCHEMA = ROLE_SPECS["slot_fill"].schema
TABLES = ("calls", "batch_requests", "batches")


def fails_in_one_line(capsys, *args) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("memaudit: error:") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


async def _pending(settings, directory) -> str:
    """A store with one slot_fill request written to a batch input file; its custom_id."""
    async with open_runtime(settings, transport=FakeOpenAI().transport()) as rt:
        with rt.llm.batching(BatchCollector(rt.store, rt.llm.refusals)):
            with pytest.raises(BatchPending) as pending:
                await rt.llm.call("slot_fill", [{"role": "user", "content": "fill"}], max_tokens=160, schema=SCHEMA)
        await rt.store.flush()
        await submit(rt.store, settings, directory)
        return pending.value.key


def _rows(db) -> dict:
    async def read():
        async with open_store(db) as store:
            return {t: [tuple(r) for r in await store.fetchall(f"SELECT * FROM {t} ORDER BY 1")] for t in TABLES}
    return anyio.run(read)


def _answer(key: str, **response) -> dict:
    body = completion({"model": "fake-model"}, orjson.dumps({"label": "a label", "reason": "because"}).decode())
    return {"id": "x", "custom_id": key, "error": None,
            "response": {"status_code": 200, "request_id": "r", "body": body, **response}}


@pytest.fixture
def pending(settings, tmp_path):
    key = anyio.run(_pending, settings, tmp_path / "batches")
    return settings.db, key


def _collect(db, path):
    return ["--db", db, "batch", "collect", "--from", path]


@pytest.mark.parametrize("make, said", [
    (lambda tmp, key: "/dev/zero", "a device, not a regular file; refused"),
    (lambda tmp, key: tmp / "absent.jsonl", "absent.jsonl: not found"),
    (lambda tmp, key: _write(tmp, [orjson.dumps(_answer(key, status_code="200"))]),
     "line 1: status_code must be a whole number, got '200'"),
    (lambda tmp, key: _write(tmp, [orjson.dumps(_answer(key)), orjson.dumps(_answer("other"))[:40]]),
     "line 2 is not JSON (a truncated or damaged file?)"),
    (lambda tmp, key: _write(tmp, [orjson.dumps(_answer(key)), orjson.dumps(_answer(key, status_code=500))]),
     f"line 2: custom_id {'{key}'} appears twice with different results"),
    (lambda tmp, key: _write(tmp, [b"\xff\xfe not json"]), "line 1 is not JSON"),
    (lambda tmp, key: _write(tmp, [orjson.dumps({"custom_id": 7})]), "line 1: not a batch output line"),
])
def test_batch_collect_refuses_a_hostile_output_file_and_stores_nothing(pending, tmp_path, capsys, make, said):
    db, key = pending
    before = _rows(db)
    err = fails_in_one_line(capsys, *_collect(db, make(tmp_path, key)))
    assert said.replace("{key}", key) in err
    assert _rows(db) == before


def _write(tmp, lines: list[bytes]):
    path = tmp / "out.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_batch_collect_refuses_an_output_over_the_size_limit(pending, tmp_path, capsys, monkeypatch):
    db, key = pending
    monkeypatch.setattr(batch_module, "MAX_OUTPUT_BYTES", 100)
    before = _rows(db)
    err = fails_in_one_line(capsys, *_collect(db, _write(tmp_path, [orjson.dumps(_answer(key))])))
    assert "larger than 100 bytes; refused" in err and _rows(db) == before


def test_batch_collect_refuses_a_fifo_at_once_in_a_fresh_process(pending, tmp_path):
    """A FIFO with no writer: the command must answer, not wait for one."""
    db, _ = pending
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    refused_at_once(tmp_path, *_collect(db, fifo))


def refused_at_once(cwd, *args) -> None:
    """`memaudit ARGS` in a fresh process refuses a FIFO in one line (a regression would hang on it:
    the process is given a minute, far beyond the instant refusal, so the test fails instead)."""
    done = subprocess.run([sys.executable, "-c", "from memaudit.cli import main; main()", *map(str, args)],
                          capture_output=True, text=True, timeout=60, cwd=cwd)
    assert done.returncode == 2 and "a FIFO, not a regular file; refused" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_foreign_custom_id_is_unknown_and_an_identical_repeat_counts_once(pending, tmp_path, capsys):
    db, key = pending
    out = _write(tmp_path, [orjson.dumps(_answer(key)), orjson.dumps(_answer(key)), orjson.dumps(_answer("nosuch"))])
    main(["--db", str(db), "batch", "collect", "--from", str(out)])
    said = capsys.readouterr().out
    assert "1 results" in said and "1 unknown custom_id(s) (not requests of this store; ignored)" in said
    assert "already collected" not in said
    main(["--db", str(db), "batch", "collect", "--from", str(out)])  # again: now it is in the cache
    said = capsys.readouterr().out
    assert "0 results" in said and "1 already collected" in said and "1 unknown custom_id(s)" in said


# -- cost --prices ------------------------------------------------------------------------------
@pytest.mark.parametrize("make, said", [
    (lambda tmp: _bytes(tmp, b'date = "2026"\nsource = "\xff\xfe"\n'), "not UTF-8 text (byte 24)"),
    (lambda tmp: "/dev/zero", "a device, not a regular file; refused"),
    (lambda tmp: _bytes(tmp, b"#" * (1024 * 1024 + 1)), "larger than 1,048,576 bytes; refused"),
])
def test_cost_refuses_a_hostile_price_file(settings, tmp_path, capsys, make, said):
    anyio.run(_empty_store, settings.db)
    err = fails_in_one_line(capsys, "--db", settings.db, "cost", "--prices", make(tmp_path))
    assert said in err


def test_cost_refuses_a_fifo_price_file_at_once(settings, tmp_path):
    anyio.run(_empty_store, settings.db)
    fifo = tmp_path / "prices.fifo"
    os.mkfifo(fifo)
    refused_at_once(tmp_path, "--db", settings.db, "cost", "--prices", fifo)


def _bytes(tmp, data: bytes):
    path = tmp / "prices.toml"
    path.write_bytes(data)
    return path


async def _empty_store(db):
    async with open_store(db):
        pass


# -- merge --into -------------------------------------------------------------------------------
def test_merge_into_a_place_that_takes_no_file_is_one_line_and_writes_nothing(tmp_path, capsys):
    anyio.run(_empty_store, tmp_path / "shard.db")
    err = fails_in_one_line(capsys, "merge", tmp_path / "shard.db", "--into", "/proc/x.db")
    assert "file /proc/x.db: cannot write beside the study store" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard.db"]


def test_a_refused_merge_into_a_newer_store_names_the_store_not_its_copy(tmp_path, capsys):
    anyio.run(_empty_store, tmp_path / "shard.db")
    into = tmp_path / "study.db"
    anyio.run(_empty_store, into)
    with sqlite3.connect(into) as conn:
        conn.execute("PRAGMA user_version=999")
    conn.close()
    before = into.read_bytes()
    err = fails_in_one_line(capsys, "merge", tmp_path / "shard.db", "--into", into)
    assert f"file {into}: the store was written by a newer memaudit" in err and ".merging" not in err
    assert into.read_bytes() == before  # SQLite's own -wal/-shm of a read aside, nothing beside it either
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == ["shard.db",
                                                                                                    "study.db"]


# -- a base URL that is no HTTP URL --------------------------------------------------------------
@pytest.mark.parametrize("how", ["flag", "env", "config", "embed"])
@pytest.mark.parametrize("url", ["ftp://host/v1?api-key=HIDDEN", "file:///etc/passwd", "http:///v1"])
def test_a_base_url_that_is_no_http_url_is_refused_by_the_config_check(tmp_path, capsys, monkeypatch, how, url):
    db, args = tmp_path / "s.db", ["--model", "m"]
    if how == "flag":
        args += ["--base-url", url]
    elif how == "env":
        monkeypatch.setenv("MEMAUDIT_BASE_URL", url)
    else:
        config = tmp_path / "c.toml"
        key = "[roles.agent]\nbase_url" if how == "config" else "embed_base_url"
        config.write_text(f'{key} = "{url}"\n')
        args += ["--config", config]
    err = fails_in_one_line(capsys, "--db", db, *args, "rollout", "--bench", "sample", "--systems", "bm25")
    assert "a base URL" in err and "HIDDEN" not in err and not db.exists()


# -- other files read whole: --config, human import, memory search --queries ---------------------
def _commands(tmp, path) -> dict[str, list]:
    db = tmp / "s.db"
    return {"config": ["--db", db, "--config", path, "bench", "list"],
            "grades": ["--db", db, "human", "import", path],
            "queries": ["memory", "search", "--system", "bm25", "--store", _bytes(tmp, b"[]"), "--queries", path]}


@pytest.mark.parametrize("command", ["config", "grades", "queries"])
def test_a_device_or_a_non_utf8_file_given_to_other_commands_is_one_line(tmp_path, capsys, command):
    anyio.run(_empty_store, tmp_path / "s.db")
    assert "a device, not a regular file; refused" in fails_in_one_line(
        capsys, *_commands(tmp_path, "/dev/zero")[command])
    if command != "grades":  # JSON: not JSON
        bad = tmp_path / "bad.txt"
        bad.write_bytes(b"\xff\xfe")
        assert "not UTF-8 text" in fails_in_one_line(capsys, *_commands(tmp_path, bad)[command])


@pytest.mark.parametrize("command", ["config", "grades", "queries"])
def test_a_fifo_given_to_other_commands_is_refused_at_once(tmp_path, command):
    anyio.run(_empty_store, tmp_path / "s.db")
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    refused_at_once(tmp_path, *_commands(tmp_path, fifo)[command])
