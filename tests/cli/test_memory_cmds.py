"""`memaudit memory search`: a dumped store in, one JSONL line of ranked results per query out."""
from __future__ import annotations

import orjson
import pytest

import memaudit.llm.embed
from memaudit.cli import main
from tests.adapters.conftest import hash_encoder

MEMORIES = [
    {"content": "[Task 1] Plan my 10k training", "category": "task", "task_index": 1, "turn": 0},
    {"content": "Agent: Run three times a week.", "category": "agent_reply", "task_index": 1, "turn": 1},
    {"content": "User: I prefer short answers.", "category": "user_reply", "task_index": 1, "turn": 1},
]


@pytest.fixture(autouse=True)
def fast_encoder(monkeypatch):
    monkeypatch.setattr(memaudit.llm.embed, "encode_with_model", hash_encoder)


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    return exit_info.value.code, capsys.readouterr()


def test_search_published_store(tmp_path, capsys):
    store = tmp_path / "memories.json"
    store.write_bytes(orjson.dumps({"num_memories": 3, "memories": MEMORIES}))
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "query": "short answers"}\n\n{"id": 2, "query": "training plan"}\n')
    main(["memory", "search", "--system", "longctx_full", "--store", str(store), "--queries", str(queries),
          "--k", "2", "--db", str(tmp_path / "m.db")])
    lines = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["id"] for line in lines] == ["q1", 2]
    first = lines[0]["results"]
    assert len(first) == 2 and first[0]["content"] == "User: I prefer short answers."
    assert first[0]["category"] == "user_reply" and first[0]["score"] >= first[1]["score"]


def test_plain_list_and_out_file(tmp_path):
    store = tmp_path / "items.json"
    store.write_bytes(orjson.dumps(MEMORIES))
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q", "query": "training"}\n')
    out = tmp_path / "out.jsonl"
    main(["memory", "search", "--system", "bm25", "--store", str(store), "--queries", str(queries),
          "--out", str(out), "--db", str(tmp_path / "m.db")])
    results = orjson.loads(out.read_text())["results"]
    assert [r["content"] for r in results] == ["[Task 1] Plan my 10k training"]


def test_bad_query_line_names_the_line(tmp_path, capsys):
    store = tmp_path / "memories.json"
    store.write_bytes(orjson.dumps(MEMORIES))
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "query": "ok"}\n{"id": "q2"}\n')
    code, captured = run_cli(["memory", "search", "--system", "simple_rag", "--store", str(store),
                              "--queries", str(queries), "--db", str(tmp_path / "m.db")], capsys)
    assert code == 2
    assert "line 2" in captured.err and captured.err.count("\n") == 1


def test_unknown_system_is_one_line(tmp_path, capsys):
    code, captured = run_cli(["memory", "search", "--system", "nope", "--store", "x", "--queries", "y"], capsys)
    assert code == 2 and "unknown memory system" in captured.err
