"""Memory systems that call a model replay identically from the cache: same ids, same decisions,
same snapshots and the same retrieve-mode evidence."""
from __future__ import annotations

import anyio

from memaudit.replay import replay_runs
from memaudit.scoring.recovery import score_runs

from tests.adapters.conftest import deployed_libraries, in_own_environment, script as script_memory
from tests.scoring.recorded import record, runtime, script

# memaudit's own systems that write with a model.
OWN_WRITING_SYSTEMS = ("amem", "file_memory", "mem0", "memt")


def writing_systems() -> tuple[str, ...]:
    """memaudit's own systems that write with a model, and every deployed library installed here
    (one in its own environment replays end to end in tests/adapters/test_libraries_cli.py, an
    integration test)."""
    return (*OWN_WRITING_SYSTEMS, *(s for s in deployed_libraries() if not in_own_environment(s)))


def replay_is_identical(settings, fake, systems) -> None:
    """Record a rollout of `systems` and its retrieve scoring; `replay` is identical with no request."""
    script_memory(script(fake))

    async def main():
        async with runtime(settings, fake) as rt:
            runs = await record(rt, systems, users=1, tasks=2)
            await score_runs(rt, runs, ["retrieve"], ks=(3,))
        requests = len(fake.requests)
        assert await replay_runs(settings) is None
        assert len(fake.requests) == requests
    anyio.run(main)


def test_replay_of_model_writing_systems_is_identical(settings, fake):
    replay_is_identical(settings, fake, writing_systems())
