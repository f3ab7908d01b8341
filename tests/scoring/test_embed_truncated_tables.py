"""Texts cut at the embedding model's window are counted per system everywhere a footprint is
shown: Table 2 (json, md), the report, and once on the rollout's output. A system whose embedder's
window is not known shows n/a, and one that embeds nothing 0 is never claimed."""
from __future__ import annotations

import anyio
import orjson

from memaudit.cli import main
from memaudit.llm.embed import Embedder, sentence_window
from memaudit.report.view import write_report
from memaudit.store import open_store
from memaudit.tables.paper import compute_tables
from memaudit.tables.paper_render import render
from memaudit.testing.fake_openai import FakeOpenAI
from memaudit.testing.http_server import serve
from tests.rollout.conftest import fake_encoder, make_bench

# A task of ~1,500 characters: past the bundled model's 256 tokens.
LONG = " ".join(["I train for a half marathon on Tuesdays and my left knee aches after long runs."] * 19)


def windowed(store=None) -> Embedder:
    """The fake encoder with the bundled model's window (its tokenizer counts, fast)."""
    return Embedder(store, encoder=fake_encoder, window=lambda: sentence_window(Embedder().model_name))


def long_bench():
    bench = make_bench(n_users=2, n_tasks=2)
    tasks = {user: tuple(task.__class__(**{**task.__dict__, "text": f"{LONG} ({task.text})"}) for task in found)
             for user, found in bench.tasks.items()}
    return bench.__class__(bench.name, bench.users, tasks)


def test_table2_and_the_report_show_the_texts_cut(settings, tmp_path, capsys, monkeypatch):
    import memaudit.runtime

    monkeypatch.setattr(memaudit.runtime, "configured_embedder", lambda store, settings, transport: windowed(store))
    db = tmp_path / "m.db"

    async def save():
        async with open_store(db) as store:
            await store.benchmarks.save(long_bench())
    anyio.run(save)
    with serve(FakeOpenAI()) as url:
        main(["rollout", "--bench", "tiny", "--systems", "simple_rag,nomem", "--tasks", "2", "--max-turns", "2",
              "--base-url", url, "--model", "fake", "--db", str(db), "--quiet"])
    out = capsys.readouterr().out.splitlines()
    named = [line for line in out if "texts cut at the embedding model's window" in line]
    assert len(named) == 1 and named[0].startswith("simple_rag: ")
    cut = int(named[0].split(": ")[1].split()[0])
    assert cut >= 2  # each user's long tasks

    main(["tables", "--format", "json", "--db", str(db)])
    table2 = {row["run"]: row for row in orjson.loads(capsys.readouterr().out)["table2"]}
    assert table2["simple_rag"]["embed_truncated"] == cut
    assert table2["nomem"]["embed_truncated"] == 0  # it embeds nothing: nothing cut

    async def views():
        async with open_store(db) as store:
            md = render(await compute_tables(store, bootstrap=0), "md")
            index = await write_report(store, tmp_path / "report")
            return md, index.read_text()
    md, index = anyio.run(views)
    header = next(line for line in md.splitlines() if line.startswith("| run | A (%)"))
    row = next(line for line in md.splitlines() if line.startswith("| simple_rag "))
    assert row.split(" | ")[header.split(" | ").index("embed truncated")] == str(cut)
    assert "embed truncated" in index
