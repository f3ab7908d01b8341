"""How scoring passes are launched: every run, mode and k of one command draws on one pool of
in-flight calls (the endpoint's `--concurrency`), which they fill together."""
from __future__ import annotations

from dataclasses import replace

import anyio
import httpx
import pytest

from memaudit.scoring.recovery import score_runs
from tests.scoring.recorded import record, runtime, script

pytestmark = pytest.mark.anyio


async def test_all_passes_of_a_command_share_one_pool_of_calls(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=1)
    in_flight, most = 0, 0
    filled = anyio.Event()

    async def counting(request):
        # Hold every request until 40 are in flight at once: one pass alone (31 targets) cannot get
        # there, so this only returns if the passes share the pool.
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        if in_flight == 40:
            filled.set()
        try:
            with anyio.fail_after(10):
                await filled.wait()
            return await fake.handle(request)
        finally:
            in_flight -= 1

    async with runtime(replace(settings, concurrency=40), fake) as rt:
        rt.llm.transport.mock = httpx.MockTransport(counting)
        await score_runs(rt, ["longctx_full"], ["dump_all", "retrieve"], ks=(1, 3, 5, 10))
        rows = await rt.store.scores.load("longctx_full")
    assert len(rows) == 31 * 5 and most == 40  # never more than the endpoint's limit
