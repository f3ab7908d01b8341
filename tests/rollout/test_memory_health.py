"""The memory health table (issue 44): per run, whether the memory system did its work at all —
calls per user message (new and cached apart), items by kind, whether its long-term store was
written, empty reads per mode, write failures (n/a for a system that writes without a model) and
texts cut to fit the embedding model — and the rollout names, once, a run whose long-term store was
never written."""
from __future__ import annotations

import orjson
import pytest

from memaudit.cli import main
from memaudit.llm.embed import Embedder
from memaudit.rollout.runner import run_rollout
from memaudit.tables.health import HEALTH, long_term_written
from memaudit.tables.paper import compute_tables
from memaudit.tables.paper_render import render
from memaudit.testing.fake_openai import FakeOpenAI

pytestmark = pytest.mark.anyio


async def test_each_run_says_what_its_memory_wrote_read_and_lost(open_rt, fake, bench):
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["amem", "bm25", "nomem"], max_turns=2, progress=False)
        messages = await rt.store.fetchone("SELECT COUNT(*) AS n FROM memory_ops WHERE run='bm25' "
                                           "AND op IN ('task_start', 'user')")
        tables = await compute_tables(rt.store, bootstrap=0)
    rows = {row["system"]: row for row in tables["health"]}
    amem, bm25, nomem = rows["amem"], rows["bm25"], rows["nomem"]
    assert bm25["messages"] == messages["n"] > 0 and amem["messages"] == bm25["messages"]
    assert amem["calls_per_message"] > 0 and amem["cached_per_message"] >= 0 and bm25["calls_per_message"] == 0
    assert amem["memory_write_failures"] == 0
    assert bm25["memory_write_failures"] is None and nomem["memory_write_failures"] is None  # no model writes
    assert bm25["long_term_written"] is True and nomem["long_term_written"] is None  # nomem keeps nothing
    assert sum(bm25["items_by_kind"].values()) > 0 and nomem["items_by_kind"] == {}
    assert bm25["empty_dump_all"] is None and bm25["reads_dump_all"] is None  # not scored yet
    data = orjson.loads(render(tables, "json"))["health"]
    assert {"system", "calls_per_message", "cached_per_message", "items_by_kind", "long_term_written"} <= set(data[0])
    md = render({"health": tables["health"]}, "md")
    assert "| " + " | ".join(c.header for c in HEALTH if "md" in c.outputs) + " |" in md


def test_a_store_of_short_term_items_only_never_wrote_its_long_term_store():
    queued = {"snapshots": 2, "kinds": {"message": 12}, "short_term": {"message"}}
    assert long_term_written(queued, 0) is False
    assert long_term_written({**queued, "kinds": {"fact": 1, "message": 12}}, 0) is True
    assert long_term_written({**queued, "kinds": {}}, 0) is False  # a model-writing system that kept nothing
    assert long_term_written({**queued, "kinds": {}}, None) is None  # nomem: nothing to write
    assert long_term_written({"snapshots": 0, "kinds": {}, "short_term": set()}, 0) is None


def test_the_rollout_names_a_run_whose_long_term_store_was_never_written(tmp_path, capsys, monkeypatch):
    """mem0 whose extraction finds no fact in any message keeps nothing: said once, with where to look."""
    import memaudit.runtime
    from memaudit.testing.http_server import serve
    from tests.rollout.conftest import fake_encoder
    from tests.rollout.test_cli_inprocess import store_tiny_bench

    monkeypatch.setattr(memaudit.runtime, "Embedder", lambda store: Embedder(store, encoder=fake_encoder))
    fake = FakeOpenAI()
    fake.on("memory_mem0_extract", lambda body: orjson.dumps({"facts": []}).decode())
    db = tmp_path / "m.db"
    store_tiny_bench(db)
    with serve(fake) as url:
        main(["rollout", "--bench", "tiny", "--systems", "mem0,bm25", "--tasks", "2", "--max-turns", "2",
              "--base-url", url, "--model", "fake", "--db", str(db), "--quiet"])
    lines = capsys.readouterr().out.splitlines()
    named = [line for line in lines if "long-term store was never written" in line]
    assert named == ["mem0: its long-term store was never written (the users' final memories hold nothing); "
                     "see `memaudit tables --only health`"]
