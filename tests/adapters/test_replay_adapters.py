"""Memory systems that call a model replay identically from the cache: same ids, same decisions,
same snapshots and the same retrieve-mode evidence."""
from __future__ import annotations

import anyio

from memaudit.replay import replay_runs
from memaudit.scoring.recovery import score_runs
from tests.adapters.conftest import installed, script as script_memory
from tests.scoring.recorded import record, runtime, script

WRITING_SYSTEMS = tuple(s for s in ("amem", "file_memory", "mem0", "memt", "mem0ai", "graphiti", "llamaindex", "langmem") if installed(s))


def test_replay_of_model_writing_systems_is_identical(settings, fake):
    script_memory(script(fake))

    async def main():
        async with runtime(settings, fake) as rt:
            runs = await record(rt, WRITING_SYSTEMS, users=1, tasks=2)
            await score_runs(rt, runs, ["retrieve"], ks=(3,))
        requests = len(fake.requests)
        assert await replay_runs(settings) is None
        assert len(fake.requests) == requests
    anyio.run(main)
