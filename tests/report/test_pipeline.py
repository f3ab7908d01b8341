"""The report over what the real pipeline stores: a rollout on the fake server, both scoring modes
and attribution, then `write_report`. The target page shows the stored score, the retrieved items
and the targeted episode's transcript."""
from __future__ import annotations

import pytest

from memaudit.report.view import write_report
from memaudit.scoring.attribution import attribute_runs
from memaudit.scoring.recovery import score_runs
from tests.report.test_view import episode, follow, recons, user_view
from tests.scoring.recorded import record, runtime, script

pytestmark = pytest.mark.anyio


async def test_report_of_a_recorded_rollout_scored_and_attributed(settings, fake, tmp_path):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=2)
        await score_runs(rt, ["longctx_full"], ["dump_all", "retrieve"])
        await attribute_runs(rt, ["longctx_full"], ["dump_all", "retrieve"])
        index = await write_report(rt.store, tmp_path / "report")
        recon = await rt.store.fetchone(
            "SELECT r.*, t.idx FROM reconstructions r JOIN tasks t ON t.user_id = r.user_id "
            "AND t.target_dimension = r.dimension WHERE r.mode='retrieve' ORDER BY r.dimension")
        turn = await rt.store.fetchone("SELECT assistant FROM turns WHERE user_id=? AND task_idx=? ORDER BY turn",
                                       (recon["user_id"], recon["idx"]))

    pass_page = follow(index, "retrieve", "Table 3")
    user, view = user_view(pass_page, recon["user_id"], "Per user")
    shown = recons(user, recon["dimension"], "longctx_full", "retrieve")
    assert shown["k"] == 5 and shown["evidence"]["items"]
    assert shown["score"] == recon["score"] and shown["judge_reason"] == recon["judge_reason"]
    assert episode(user, "longctx_full", recon["idx"])["turns"][0][1] == turn["assistant"]
