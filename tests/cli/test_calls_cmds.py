"""`memaudit calls`: every recorded call, filtered by run, role glob, artifact, failure and count."""
from __future__ import annotations

import anyio
import orjson
import pytest

from memaudit.cli import main
from memaudit.store import open_store
from memaudit.testing.http_server import serve
from tests.rollout.conftest import make_bench

REQUEST = {"v": 1, "model": "m", "backend": "openai", "messages": [{"role": "user", "content": "hello"}],
           "temperature": 0.0, "top_p": None, "max_tokens": 10, "seed": 7, "schema": None, "sample": 0}


def seed_store(db) -> None:
    async def main_():
        async with open_store(db) as store:
            await store.benchmarks.save(make_bench())
            for run in ("r1", "r2"):
                await store.runs.ensure(run, "nomem", "tiny")
            for key, role, ok, created in (("k1", "agent", True, "t1"), ("k2", "memory:mem0_extract", True, "t2"),
                                           ("k3", "memory:mem0_decide", False, "t3"), ("k4", "slot_fill", True, "t4")):
                response = {"text": f"answer {key}", "usage": {}} if ok else {"error_kind": "InvalidOutput",
                                                                               "error": "bad json"}
                store.calls.put_call(key=key, role=role, model="m", request=orjson.dumps(REQUEST).decode(),
                                     response=orjson.dumps(response).decode(), ok=ok, prompt_tokens=5,
                                     completion_tokens=1, latency=0.5, created=created)
            await store.write([*store.calls.use_statements("r1", "episode:user_001:1", [
                ("agent", "k1", False), ("memory:mem0_extract", "k2", False), ("memory:mem0_decide", "k3", False)]),
                *store.calls.use_statements("r2", "episode:user_001:1", [("agent", "k1", True)]),
                *store.calls.use_statements("r2", "recon:dump_all:0:default:user_001:tools", [("slot_fill", "k4", False)])])
    anyio.run(main_)


def calls(db, capsys, *args) -> list[dict]:
    main(["--db", str(db), "calls", "--json", *args])
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_filters(tmp_path, capsys):
    db = tmp_path / "m.db"
    seed_store(db)
    assert [c["key"] for c in calls(db, capsys)] == ["k1", "k2", "k3", "k4"]
    assert [c["key"] for c in calls(db, capsys, "--run", "r1", "--role", "memory:*")] == ["k2", "k3"]
    assert [c["key"] for c in calls(db, capsys, "--artifact", "recon:*")] == ["k4"]
    assert [c["key"] for c in calls(db, capsys, "--failed")] == ["k3"]
    assert [c["key"] for c in calls(db, capsys, "--limit", "2")] == ["k1", "k2"]
    by_run = {run: calls(db, capsys, "--run", run, "--role", "agent")[0]["from_cache"] for run in ("r1", "r2")}
    assert by_run == {"r1": False, "r2": True}


def test_json_lines_carry_the_request_as_sent_and_the_outcome(tmp_path, capsys):
    db = tmp_path / "m.db"
    seed_store(db)
    first, _, failed, _ = calls(db, capsys)
    assert first["request"]["messages"] == REQUEST["messages"] and first["request"]["seed"] == 7
    assert first["response"] == "answer k1" and first["ok"] is True and first["latency"] == 0.5
    assert first["usage"] == {"prompt_tokens": 5, "completion_tokens": 1, "cached_tokens": 0, "reasoning_tokens": 0}
    assert failed["ok"] is False and failed["response"] is None and failed["error"]["error"] == "bad json"
    assert set(first) >= {"key", "role", "model", "request", "response", "usage", "latency", "ok", "from_cache"}


def test_table_and_unknown_run(tmp_path, capsys):
    db = tmp_path / "m.db"
    seed_store(db)
    main(["--db", str(db), "calls", "--role", "memory:*"])
    out = capsys.readouterr().out
    assert "memory:mem0_extract" in out and "FAILED" in out and "2 call(s)" in out
    with pytest.raises(SystemExit) as exit_info:
        main(["--db", str(db), "calls", "--run", "ghost"])
    assert exit_info.value.code == 2 and "unknown run 'ghost'" in capsys.readouterr().err


def test_memory_side_calls_of_a_real_rollout(tmp_path, capsys, monkeypatch):
    """The acceptance line: one JSON line per memory-side call the run used, no API key anywhere."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-never-stored")
    db = tmp_path / "m.db"

    async def save():
        async with open_store(db) as store:
            await store.benchmarks.save(make_bench())
    anyio.run(save)
    with serve() as url:
        main(["rollout", "--bench", "tiny", "--systems", "mem0", "--base-url", url, "--model", "fake", "--db", str(db),
              "--users", "user_001", "--tasks", "1", "--max-turns", "2", "--quiet"])
    capsys.readouterr()

    async def memory_uses():
        async with open_store(db) as store:
            return [r["key"] for r in await store.fetchall(
                "SELECT DISTINCT key FROM call_uses WHERE run='mem0' AND role LIKE 'memory:%' ORDER BY key")]
    expected = anyio.run(memory_uses)
    main(["--db", str(db), "calls", "--run", "mem0", "--role", "memory:*", "--json"])
    text = capsys.readouterr().out
    lines = [orjson.loads(line) for line in text.splitlines()]
    assert expected and sorted(line["key"] for line in lines) == expected
    assert all(line["role"].startswith("memory:") and line["request"]["messages"] for line in lines)
    assert "sk-secret" not in text


def test_embeddings_are_listed_apart_from_calls(tmp_path, capsys):
    """A system that only embeds makes no calls: `calls --embeddings` shows what it cached."""
    db = tmp_path / "s.db"
    seed_store(db)

    async def embed():
        async with open_store(db) as store:
            store.vectors.put_vectors("all-MiniLM-L6-v2", {"h1": b"\0" * 1536, "h2": b"\0" * 1536})
            store.vectors.put_vectors("bge-m3", {"h1": b"\0" * 4096})
    anyio.run(embed)
    assert calls(db, capsys, "--embeddings") == [{"model": "all-MiniLM-L6-v2", "vectors": 2, "bytes": 3072},
                                                 {"model": "bge-m3", "vectors": 1, "bytes": 4096}]
    main(["--db", str(db), "calls", "--embeddings"])
    assert "3 cached vector(s)" in capsys.readouterr().out


def test_no_matching_call_points_at_the_embeddings(tmp_path, capsys):
    db = tmp_path / "s.db"
    seed_store(db)
    main(["--db", str(db), "calls", "--role", "memory:nothing*"])
    assert "0 call(s) (embeddings are cached apart from calls: `memaudit calls --embeddings`" in \
        " ".join(capsys.readouterr().out.split())
