"""Recovery scoring: read operators, the slot-filling reader, the judge, overflow, resume."""
from __future__ import annotations

from memaudit.types import for_reader

import pytest

from memaudit.adapters.registry import get_adapter
from memaudit.scoring.recovery import retrieval_query, score_runs
from memaudit.store import dumps_indented, loads
from tests.scoring.recorded import record, requests_for, runtime, script

pytestmark = pytest.mark.anyio


async def statuses(store, run, mode):
    return [(r.status, r.score) for r in await store.scores.load(run, mode)]


async def test_scores_every_entry_of_every_user_and_skips_nomem_retrieve(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt)
        await score_runs(rt, ["longctx_full", "nomem"], ["dump_all", "retrieve"], ks=(1, 5))
        for run, score in (("longctx_full", 0.5), ("nomem", 0.0)):  # an empty memory supports nothing
            dump = await rt.store.scores.load(run, "dump_all")
            assert len(dump) == 62 and {r.k for r in dump} == {0}
            assert all(r.status == "ok" and r.score == score for r in dump)
        assert await rt.store.scores.load("nomem", "retrieve") == []
        retrieve = await rt.store.scores.load("longctx_full", "retrieve")
        assert {r.k for r in retrieve} == {1, 5} and len(retrieve) == 124
        assert all(len(r.evidence["items"]) == r.k for r in retrieve)
        passes = await rt.store.fetchall("SELECT * FROM score_passes ORDER BY run, mode, k")
        assert [(p["run"], p["mode"], p["k"]) for p in passes] == [
            ("longctx_full", "dump_all", 0), ("longctx_full", "retrieve", 1), ("longctx_full", "retrieve", 5),
            ("nomem", "dump_all", 0)]
        config = loads(passes[0]["config"])
        assert config["dims"] == "all" and config["context_window"] is None
        assert config["reader_model"] == "fake-model" and len(config["judge_prompt"]) == 64
        uses = await rt.store.fetchone("SELECT COUNT(*) AS n FROM call_uses WHERE artifact LIKE 'recon:%'")
        assert uses["n"] > 0

        before = len(fake.requests)
        await score_runs(rt, ["longctx_full", "nomem"], ["dump_all", "retrieve"], ks=(1, 5))
        assert len(fake.requests) == before  # resume: every key exists


async def test_retrieve_query_never_contains_the_target(settings, fake, monkeypatch):
    script(fake)
    queries = []
    adapter = get_adapter("longctx_full")
    real_search = adapter.search

    async def spy(self, query, k):
        queries.append(query)
        return await real_search(self, query, k)

    monkeypatch.setattr(adapter, "search", spy)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",))
        await score_runs(rt, ["longctx_full"], ["retrieve"])
        bench = await rt.store.benchmarks.load("tiny")
    assert len(queries) == 62
    entries = [e for u in bench.users for e in u.bank]
    for query in queries:
        for e in entries:
            assert e.short not in query and e.explanation not in query
    e = entries[0]
    assert retrieval_query(e.category, e.dimension).startswith(
        f"What best describes the user's {e.dimension.replace('_', ' ')}? ")
    for request in requests_for(fake, "slot_fill"):
        prompt = str(request["messages"])
        assert not any(e.short in prompt or e.explanation in prompt for e in entries)


async def test_memory_block_comes_before_the_dimension(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1)
        await score_runs(rt, ["longctx_full"], ["dump_all"])
        block = (await rt.store.episodes.last_snapshot("longctx_full", "user_001"))["items"]
    fills = requests_for(fake, "slot_fill")
    assert len(fills) == 31
    users = [f["messages"][-1]["content"] for f in fills]
    first_item = block[0]["content"]
    for text, body in zip(users, fills):
        dimension = text.rsplit("slot name: ", 1)[1].split("\n")[0]
        assert text.index(first_item) < text.index(dimension)
    # All 31 slot fills share the system prompt and the user message up to the end of the memory.
    common = min(len(t) for t in users)
    while len({t[:common] for t in users}) > 1:
        common -= 1
    memory = dumps_indented([for_reader(item) for item in block])  # the system's fields, not memaudit's kind
    assert common >= users[0].index(memory) + len(memory)
    assert len({str(f["messages"][0]) for f in fills}) == 1


async def test_off_grid_judge_is_a_failed_row_not_a_zero(settings, fake):
    script(fake).on("recovery_judge", lambda body: {"score": 0.6, "reason": "between levels"})
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=1)
        await score_runs(rt, ["longctx_full"], ["dump_all"])
        rows = await rt.store.scores.load("longctx_full", "dump_all")
    assert len(rows) == 31
    assert all(r.status == "failed" and r.score is None and r.label for r in rows)
    assert "score must be exactly one of" in rows[0].error
    assert len(requests_for(fake, "recovery_judge")) == 31 * 3  # the call plus two repairs each


async def test_unknown_label_scores_zero_without_a_judge_call(settings, fake):
    script(fake).on("slot_fill", lambda body: {"label": "unknown", "reason": "nothing in memory"})
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=1)
        await score_runs(rt, ["longctx_full"], ["dump_all"])
        rows = await rt.store.scores.load("longctx_full", "dump_all")
    assert all(r.status == "ok" and r.score == 0.0 and "unknown" in r.judge_reason for r in rows)
    assert requests_for(fake, "recovery_judge") == []


async def test_empty_memory_is_unknown_without_any_call(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("nomem",), users=1, tasks=1)
        await score_runs(rt, ["nomem"], ["dump_all"])
        rows = await rt.store.scores.load("nomem", "dump_all")
    assert len(rows) == 31 and all(r.label == "unknown" and r.score == 0.0 and r.status == "ok" for r in rows)
    assert rows[0].evidence == {"n_items": 0, "chars": 2} and "no items" in rows[0].reason
    assert requests_for(fake, "slot_fill") == [] and requests_for(fake, "recovery_judge") == []


async def test_overflow_by_the_servers_token_count_and_by_server_error(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=2, tasks=1)
        await score_runs(rt, ["longctx_full"], ["dump_all"], context_window=300, dims="targeted")
        counted = await rt.store.scores.load("longctx_full", "dump_all")
        assert [(r.status, r.score) for r in counted] == [("overflow", 0.0)] * 2
        assert "tokens > window 300" in counted[0].error
        assert requests_for(fake, "slot_fill") == []
        # The count is recorded like a call: replay decides overflow without a server.
        assert await rt.store.fetchone("SELECT 1 FROM calls WHERE role='tokenize:slot_fill'") is not None

        fake.faults = ["overflow", "overflow"]
        await score_runs(rt, ["longctx_full"], ["retrieve"], dims="targeted")
        served = await rt.store.scores.load("longctx_full", "retrieve")
        assert [(r.status, r.score) for r in served] == [("overflow", 0.0)] * 2
        assert requests_for(fake, "recovery_judge") == []


async def test_window_1600_overflows_every_dump_of_a_12_task_store_and_no_retrieve(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=12)
        await score_runs(rt, ["longctx_full"], ["dump_all", "retrieve"], context_window=1600)
        dump = await rt.store.scores.load("longctx_full", "dump_all")
        retrieve = await rt.store.scores.load("longctx_full", "retrieve")
    assert len(dump) == 31 and all(r.status == "overflow" for r in dump)
    assert len(retrieve) == 31 and all(r.status == "ok" for r in retrieve)


async def test_targeted_dims_scores_only_entries_whose_task_ran(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("nomem",), users=2, tasks=2)
        await score_runs(rt, ["nomem"], ["dump_all"], dims="targeted")
        rows = await rt.store.scores.load("nomem", "dump_all")
        bench = await rt.store.benchmarks.load("tiny")
        config = loads((await rt.store.fetchone("SELECT config FROM score_passes"))["config"])
    expected = {(u.id, t.target_dimension) for u in bench.users for t in bench.tasks[u.id][:2]}
    assert {(r.user_id, r.dimension) for r in rows} == expected
    assert config["dims"] == "targeted"


async def test_unknown_run_and_mode_are_bad_input(settings, fake):
    from memaudit.errors import BadInput
    async with runtime(settings, fake) as rt:
        with pytest.raises(BadInput, match="unknown run 'nope'"):
            await score_runs(rt, ["nope"], ["dump_all"])
        with pytest.raises(BadInput, match="unknown mode"):
            await score_runs(rt, ["nope"], ["everything"])


async def test_a_server_without_a_tokenizer_is_asked_and_its_context_error_decides(settings, fake):
    """No characters-per-token guess: without the server's count the call is made."""
    script(fake)
    fake.tokenize = False
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=1)
        fake.faults = ["overflow"]
        await score_runs(rt, ["longctx_full"], ["dump_all"], context_window=300, dims="targeted")
        (row,) = await rt.store.scores.load("longctx_full", "dump_all")
    assert row.status == "overflow" and len(requests_for(fake, "slot_fill")) == 1


