"""A memory system's lost writes are counted everywhere a failure is: table2 (json, md), the report
and the rollout summary. A mem0 run whose memory calls return garbage half the time must not look
like a clean one."""
from __future__ import annotations

import hashlib
import random

import anyio
import orjson

from memaudit.cli import main
from memaudit.llm.embed import Embedder
from memaudit.report.view import write_report
from memaudit.rollout.runner import run_rollout
from memaudit.runtime import open_runtime
from memaudit.store import loads
from memaudit.tables.metrics import memory_write_failures
from memaudit.tables.paper import compute_tables
from memaudit.tables.paper_render import render
from memaudit.testing.fake_openai import FakeOpenAI, example, schema_of
from tests.rollout.conftest import fake_encoder, make_bench


def half_garbage(body: dict):
    """Invalid output for half of the memory-side calls (chosen by the call, so repairs fail too)."""
    digest = hashlib.sha256(orjson.dumps(body["messages"][:2])).digest()
    return "{not json" if digest[0] % 2 else example(schema_of(body), random.Random(digest[1]))


def lossy_mem0_store(settings) -> int:
    """Roll out mem0 on the half-garbage fake; returns the failures its snapshots recorded."""
    fake = FakeOpenAI()
    fake.on("memory_mem0_extract", half_garbage).on("memory_mem0_decide", half_garbage)

    async def go():
        async with open_runtime(settings, transport=fake.transport(),
                                embedder=Embedder(None, encoder=fake_encoder)) as rt:
            bench = make_bench(n_users=2, n_tasks=2)
            await rt.store.benchmarks.save(bench)
            await run_rollout(rt, bench, ["mem0", "nomem"], max_turns=2, progress=False)
            states = await rt.store.fetchall("SELECT user_id, MAX(task_idx), state FROM snapshots "
                                             "WHERE run='mem0' GROUP BY user_id")
            return sum(loads(r["state"])["write_failures"] for r in states)
    return anyio.run(go)


def test_a_half_garbage_mem0_run_shows_its_write_failures(settings, tmp_path, capsys):
    lost = lossy_mem0_store(settings)
    assert lost > 0
    main(["tables", "--format", "json", "--db", str(settings.db)])
    table2 = {row["run"]: row for row in orjson.loads(capsys.readouterr().out)["table2"]}
    assert table2["mem0"]["memory_write_failures"] == lost
    assert table2["mem0"]["failed_episodes"] == 0  # the episodes themselves went fine
    # nomem writes without a model: it cannot lose a write, so it keeps no count (n/a, not 0)
    assert table2["nomem"]["memory_write_failures"] is None

    async def views():
        from memaudit.store import open_store
        async with open_store(settings.db) as store:
            per_user = await memory_write_failures(store, "mem0")
            md = render(await compute_tables(store, bootstrap=0), "md")
            index = await write_report(store, tmp_path / "report")
            return per_user, md, index.read_text(), (tmp_path / "report/runs/mem0.html").read_text()
    per_user, md, index, run_page = anyio.run(views)
    assert sum(per_user.values()) == lost
    header = next(line for line in md.splitlines() if line.startswith("| run | A (%)"))
    row = next(line for line in md.splitlines() if line.startswith("| mem0 "))
    column = header.split(" | ").index("memory write failures")
    assert row.split(" | ")[column] == str(lost)
    assert "memory write failures" in index and "memory write failures" in run_page


def test_the_rollout_summary_counts_write_failures(tmp_path, capsys, monkeypatch):
    import memaudit.runtime
    from memaudit.testing.http_server import serve
    from tests.rollout.test_cli_inprocess import store_tiny_bench

    monkeypatch.setattr(memaudit.runtime, "Embedder", lambda store: Embedder(store, encoder=fake_encoder))
    fake = FakeOpenAI()
    fake.on("memory_mem0_extract", half_garbage).on("memory_mem0_decide", half_garbage)
    db = tmp_path / "m.db"
    store_tiny_bench(db)
    with serve(fake) as url:
        main(["rollout", "--bench", "tiny", "--systems", "mem0,nomem", "--tasks", "2", "--max-turns", "2",
              "--base-url", url, "--model", "fake", "--db", str(db), "--quiet"])
    out = capsys.readouterr().out
    mem0 = next(line for line in out.splitlines() if line.startswith("mem0:"))
    nomem = next(line for line in out.splitlines() if line.startswith("nomem:"))
    lost = int(mem0.rsplit(", ", 1)[1].split()[0])
    assert lost > 0 and mem0.endswith(f"{lost} memory write failures")
    assert "memory write failures" not in nomem  # nomem makes no memory calls: nothing to lose, no count
    # ... and who lost them, named once: system (the run), user, how many
    named = [line for line in out.splitlines() if line.startswith("mem0: memory writes lost")]
    assert len(named) == 1 and sum(int(n) for n in named[0].split(": ")[-1].replace(",", "").split()[1::2]) == lost
    assert not any(line.startswith("nomem: memory writes lost") for line in out.splitlines())
