"""`memaudit serve` (command construction, vLLM hand-over) and `memaudit cache stats|merge`."""
from __future__ import annotations

import sys
from dataclasses import replace

import anyio
import orjson
import pytest

from memaudit.cli import main
from memaudit.llm.dialects import DIALECTS
from memaudit.errors import BadInput, InvalidOutput
from memaudit.llm.client import LLM
from memaudit.store import open_store
from memaudit.testing.fake_openai import FakeOpenAI

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
          "additionalProperties": False}


def cli(capsys, *argv):
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def fill(settings, db, seeds, *, fake=None, run="r1", vectors=()):
    """Make one agent call per seed into store `db` (recording uses), plus embedding rows."""
    async def main_():
        async with open_store(db) as store:
            llm = LLM(replace(settings, db=db), store.calls, transport=(fake or FakeOpenAI()).transport())
            for artifact, parts in (("first", seeds), ("again", seeds[:1])):  # "again" is a cache hit
                with llm.collect() as uses:
                    for s in parts:
                        try:
                            await llm.call("agent", [{"role": "user", "content": "hi"}], schema=SCHEMA,
                                           seed_parts=(s,))
                        except InvalidOutput:
                            pass
                await store.write(store.calls.use_statements(run, artifact, uses))
            store.vectors.put_vectors("minilm", {h: b"\x00" * 8 for h in vectors})
            await llm.aclose()
    anyio.run(main_)


def count(db, sql):
    async def main_():
        async with open_store(db) as store:
            return (await store.fetchone(sql))[0]
    return anyio.run(main_)


def test_cache_stats_reports_hits_misses_and_bytes(settings, capsys, tmp_path):
    fill(settings, settings.db, [1, 2, 3])
    code, out, _ = cli(capsys, "cache", "stats", "--json", "--db", str(settings.db))
    assert code == 0
    (row,) = orjson.loads(out)
    assert row["role"] == "agent" and row["stored"] == 3 and row["failed"] == 0
    assert row["misses"] == 3 and row["hits"] == 1 and row["bytes"] > 100
    code, out, _ = cli(capsys, "cache", "stats", "--db", str(settings.db))
    assert code == 0 and "agent" in out


def test_cache_merge_is_a_content_addressed_union_and_idempotent(settings, capsys, tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    fill(settings, a, [1, 2], vectors=["h1"])
    fill(settings, b, [2, 3, 4], vectors=["h1", "h2"])
    code, out, _ = cli(capsys, "cache", "merge", str(b), "--db", str(a))
    assert code == 0 and "2 calls added" in out and "1 embeddings added" in out
    assert count(a, "SELECT COUNT(*) FROM calls") == 4
    assert count(a, "SELECT COUNT(*) FROM embeddings") == 2
    code, out, _ = cli(capsys, "cache", "merge", str(b), "--db", str(a))
    assert code == 0 and "0 calls added" in out and count(a, "SELECT COUNT(*) FROM calls") == 4


def test_merge_replaces_a_recorded_failure_by_an_answer(settings, capsys, tmp_path):
    broken = FakeOpenAI().on("agent", lambda body: "{never json")
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    fill(settings, a, [7], fake=broken)
    fill(settings, b, [7])
    assert count(a, "SELECT COUNT(*) FROM calls WHERE ok=0") == 1
    code, out, _ = cli(capsys, "cache", "merge", str(b), "--db", str(a))
    assert code == 0 and "1 recorded failures replaced" in out
    assert count(a, "SELECT COUNT(*) FROM calls WHERE ok=0") == 0
    # the other way round a stored answer is kept
    code, out, _ = cli(capsys, "cache", "merge", str(tmp_path / "a.db"), "--db", str(b))
    assert count(b, "SELECT COUNT(*) FROM calls WHERE ok=1") == 1


def test_merge_refuses_missing_or_foreign_sources(settings, capsys, tmp_path):
    fill(settings, settings.db, [1])
    code, _, err = cli(capsys, "cache", "merge", str(tmp_path / "nope.db"), "--db", str(settings.db))
    assert code == 2 and "nope.db" in err and "no such store" in err
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 200)
    code, _, err = cli(capsys, "cache", "merge", str(junk), "--db", str(settings.db))
    assert code == 2 and "junk.db" in err and "not a memaudit store" in err
    code, _, err = cli(capsys, "cache", "merge", str(settings.db), "--db", str(settings.db))
    assert code == 2 and "itself" in err


def test_serve_builds_the_llamacpp_command(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    pytest.importorskip("llama_cpp")
    cmd = DIALECTS["llamacpp"].engine_command(port=8123, threads=3, model_path=gguf, model=None)
    assert cmd[:3] == [sys.executable, "-m", "llama_cpp.server"]
    assert cmd[cmd.index("--port") + 1] == "8123" and cmd[cmd.index("--n_threads") + 1] == "3"
    assert cmd[cmd.index("--model") + 1] == str(gguf) and cmd[cmd.index("--host") + 1] == "127.0.0.1"


def test_serve_vllm_hands_over_or_explains(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    code, _, err = cli(capsys, "serve", "--engine", "vllm", "--model", "Qwen/Qwen3-4B")
    assert code == 2 and "vLLM is not installed" in err
    with pytest.raises(BadInput, match="--model"):
        DIALECTS["vllm"].engine_command(port=1, threads=1, model_path=None, model=None)
    fake_vllm = tmp_path / "vllm"
    fake_vllm.write_text("#!/bin/sh\necho \"$@\" > args.txt\n")
    fake_vllm.chmod(0o755)
    cmd = DIALECTS["vllm"].engine_command(port=8000, threads=2, model_path=None, model="Qwen/Qwen3-4B")
    assert cmd[:3] == [str(fake_vllm), "serve", "Qwen/Qwen3-4B"]
    code, _, _ = cli(capsys, "serve", "--engine", "vllm", "--model", "Qwen/Qwen3-4B", "--port", "8001")
    assert code == 0 and "serve Qwen/Qwen3-4B --host 127.0.0.1 --port 8001" in (tmp_path / "args.txt").read_text()
