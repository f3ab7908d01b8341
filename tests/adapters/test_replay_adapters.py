"""Memory systems that call a model replay identically from the cache: same ids, same decisions,
same snapshots and the same retrieve-mode evidence."""
from __future__ import annotations

import anyio

from memaudit.replay import replay_runs
from memaudit.scoring.recovery import score_runs
import pytest

from tests.adapters.conftest import deployed_libraries, in_own_environment, script as script_memory
from tests.scoring.recorded import record, runtime, script

# memaudit's own systems that write with a model, and every deployed library installed here (one in
# its own environment replays end to end in tests/adapters/test_libraries_cli.py, an integration test).
WRITING_SYSTEMS = ("amem", "file_memory", "mem0", "memt",
                   *(s for s in deployed_libraries() if not in_own_environment(s)))


@pytest.mark.library_clients
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
