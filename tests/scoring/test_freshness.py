"""Scoring a run that is still being written: only users whose planned episodes have all finished
are scored (the others are named), every reconstruction records the snapshot it read, a stale one
is scored again, and tables refuse to show it beside a newer footprint."""
from __future__ import annotations

from dataclasses import replace

import anyio
import httpx
import pytest

from memaudit.errors import BadInput
from memaudit.llm.embed import Embedder
from memaudit.replay import replay_runs
from memaudit.runtime import open_runtime
from memaudit.scoring.attribution import attribute_runs
from memaudit.scoring.recovery import score_runs
from memaudit.tables.paper import compute_tables, without_measurements
from memaudit.testing.fake_openai import FakeOpenAI
from tests.rollout.conftest import fake_encoder
from tests.scoring.recorded import record, runtime, script

pytestmark = pytest.mark.anyio
MODES = ["dump_all", "retrieve"]


async def scored_after(settings, tmp_path) -> dict:
    """Tables of the same rollout, scored only once it had finished."""
    quiet = replace(settings, db=tmp_path / "after.db")
    async with runtime(quiet, script(FakeOpenAI())) as rt:
        runs = await record(rt)
        assert await score_runs(rt, runs, MODES) == []
        return without_measurements(await compute_tables(rt.store, bootstrap=0))


class SlowUser(httpx.AsyncBaseTransport):
    """The fake, with user_002's calls slower: user_001 finishes while user_002 is still running."""

    def __init__(self, fake: FakeOpenAI):
        self.inner = fake.transport()

    async def handle_async_request(self, request):
        if b"user_002" in request.content:
            await anyio.sleep(0.02)
        return await self.inner.handle_async_request(request)


async def test_scoring_during_a_rollout_then_after_it_equals_scoring_only_after(settings, tmp_path):
    expected = await scored_after(settings, tmp_path)
    skipped: list[str] = []
    async with open_runtime(settings, transport=SlowUser(script(FakeOpenAI()))) as rt:
        rt.embedder = Embedder(rt.store.vectors, encoder=fake_encoder)

        async def score_midway():
            while (await rt.store.fetchone("SELECT COUNT(*) AS n FROM episodes WHERE user_id='user_001'"))["n"] < 6:
                await anyio.sleep(0.005)
            skipped.extend(await score_runs(rt, ["longctx_full", "nomem"], MODES))

        async with anyio.create_task_group() as tg:
            tg.start_soon(score_midway)
            runs = await record(rt)
        assert skipped and all("user user_002 skipped" in line for line in skipped)
        midway = await rt.store.fetchall("SELECT run, user_id, snapshot_task FROM reconstructions")
        assert midway and all(r["user_id"] == "user_001" and r["snapshot_task"] == 3 for r in midway)
        assert await score_runs(rt, runs, MODES) == []
        assert without_measurements(await compute_tables(rt.store, bootstrap=0)) == expected
    assert await replay_runs(settings) is None


async def test_users_whose_episodes_are_not_all_finished_are_named_and_skipped(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",))
        # the state a concurrent `score` sees while user_002's last episode is being run
        last = "run='longctx_full' AND user_id='user_002' AND task_idx=3"
        await rt.store.write([(f"DELETE FROM snapshots WHERE {last}", ()), (f"DELETE FROM episodes WHERE {last}", ())])
        skipped = await score_runs(rt, ["longctx_full"], ["dump_all"])
        assert skipped == ["longctx_full: user user_002 skipped: 2 of 3 planned episodes finished (the rollout is "
                           "still running or was stopped; score again once it is complete)"]
        users = {r["user_id"] for r in await rt.store.fetchall("SELECT DISTINCT user_id FROM reconstructions")}
        assert users == {"user_001"}


async def test_a_stale_reconstruction_is_refused_by_tables_and_rescored(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        runs = await record(rt, ("longctx_full",))
        await score_runs(rt, runs, ["dump_all"])
        await attribute_runs(rt, runs, ["dump_all"])
        attributed = (await rt.store.fetchone("SELECT COUNT(*) AS n FROM attributions WHERE user_id='user_001'"))["n"]
        # as an older memaudit left it: scored from the store after the first of three episodes
        await rt.store.write([("UPDATE reconstructions SET snapshot_task=1, score=0.0 WHERE user_id='user_001'", ())])
        with pytest.raises(BadInput) as info:
            await compute_tables(rt.store, bootstrap=0)
        message = str(info.value)
        assert "31 reconstruction(s) of user user_001 read the memory after task 1, but the final memory is after " \
               "task 3" in message and "memaudit score" in message and "\n" not in message

        assert await score_runs(rt, runs, ["dump_all"]) == []
        rows = await rt.store.scores.load("longctx_full", "dump_all", user_id="user_001")
        assert len(rows) == 31 and {r.snapshot_task for r in rows} == {3} and {r.score for r in rows} == {0.5}
        # attributions made from the stale rows went with them; attribute makes them again
        assert attributed and (await rt.store.fetchone(
            "SELECT COUNT(*) AS n FROM attributions WHERE user_id='user_001'"))["n"] == 0
        await compute_tables(rt.store, bootstrap=0)
        await attribute_runs(rt, runs, ["dump_all"])
        assert (await rt.store.fetchone(
            "SELECT COUNT(*) AS n FROM attributions WHERE user_id='user_001'"))["n"] == attributed
