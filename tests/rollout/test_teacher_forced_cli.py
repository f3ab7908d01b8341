"""`memaudit rollout --transcripts RUN` over real loopback HTTP, then score, attribute, tables, view
and replay on the teacher-forced runs, unchanged."""
from __future__ import annotations

import anyio
import orjson
import pytest

from memaudit.cli import main
from memaudit.scoring.recovery import score_runs
from memaudit.testing.fake_openai import FakeOpenAI, schema_name
from memaudit.testing.http_server import serve
from tests.scoring.recorded import record, runtime, script

FLAGS = ["--model", "fake-model", "--backend", "openai"]


def record_scored_source(settings, fake) -> None:
    """The source run, recorded with the fake encoder and scored, so every vector the teacher-forced
    runs and their scoring need is in the store (no embedding model is loaded)."""
    async def go():
        async with runtime(settings, fake) as rt:
            await record(rt, ("longctx_full",), users=2, tasks=2)
            await score_runs(rt, ["longctx_full"], ["dump_all", "retrieve"])
    anyio.run(go)


def no_embedding_model(texts):
    raise AssertionError(f"embedding model loaded for {texts[:1]}")


def test_teacher_forced_runs_score_tabulate_report_and_replay(settings, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("memaudit.llm.embed.encode_with_model", no_embedding_model)
    fake = script(FakeOpenAI())
    record_scored_source(settings, fake)
    db = str(settings.db)
    with serve(fake) as url:
        before = len(fake.requests)
        main(["rollout", "--db", db, "--base-url", url, *FLAGS, "--bench", "tiny", "--systems", "longctx_full,bm25",
              "--transcripts", "longctx_full", "--quiet"])
        assert len(fake.requests) == before  # neither system calls a model; no dialogue role is called
        out = capsys.readouterr().out
        assert "longctx_full_tf_longctx_full: 4 episodes" in out and "teacher-forced" in out
        forced = ["longctx_full_tf_longctx_full", "bm25_tf_longctx_full"]
        main(["score", "--db", db, "--base-url", url, *FLAGS, "--mode", "both", "--runs", ",".join(forced)])
        main(["attribute", "--db", db, "--base-url", url, *FLAGS, "--mode", "dump_all", "--runs", ",".join(forced)])
        scoring = fake.requests[before:]
        assert scoring and not [r for r in scoring if schema_name(r) in ("simulator", "pref_judge", None)]
    capsys.readouterr()

    main(["tables", "--db", db, "--format", "json", "--bootstrap", "0"])
    tables = orjson.loads(capsys.readouterr().out)
    rows = {r["run"]: r for r in tables["table2"]}
    source = rows["longctx_full"]
    assert source["teacher_forced"] is False and source["source_run"] is None
    for run in forced:
        row = rows[run]
        assert row["teacher_forced"] is True and row["source_run"] == "longctx_full"
        assert (row["A"], row["C"], row["D"]) == (source["A"], source["C"], source["D"])
        assert row["B_dump_all"] is not None and row["B_retrieve"] is not None
    assert rows["longctx_full_tf_longctx_full"]["items"] == source["items"]
    assert {r["run"] for r in tables["table4"] if r["mode"] == "dump_all" and r["ok"] is not None} >= set(forced)

    main(["tables", "--db", db, "--format", "md", "--only", "table2", "--bootstrap", "0"])
    assert "| longctx_full_tf_longctx_full (teacher-forced on longctx_full) |" in capsys.readouterr().out
    main(["view", "--db", db, "--out", str(tmp_path / "report")])
    index = (tmp_path / "report" / "index.html").read_text()
    assert index.count("teacher-forced on longctx_full") == 2
    run_page = (tmp_path / "report" / "runs" / "bm25_tf_longctx_full.html").read_text()
    assert "teacher-forced: memory was fed the recorded episodes of" in run_page
    capsys.readouterr()

    main(["replay", "--db", db, "--base-url", "http://fake.test/v1", *FLAGS])
    assert capsys.readouterr().out.strip() == "identical"


def test_max_turns_does_not_apply_to_recorded_episodes(settings, capsys):
    fake = script(FakeOpenAI())
    record_scored_source(settings, fake)
    with pytest.raises(SystemExit) as exit_info:
        main(["rollout", "--db", str(settings.db), "--base-url", "http://fake.test/v1", *FLAGS, "--bench", "tiny",
              "--systems", "bm25", "--transcripts", "longctx_full", "--max-turns", "3"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--max-turns does not apply" in err and err.strip().count("\n") == 0
