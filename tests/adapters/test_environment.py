"""A library in its own environment (adapters/environment.py): the generic worker protocol, on a
scratch library whose "environment" is this test's Python (tests/adapters/scratch_environment.py).
Its worker is a real process speaking JSON lines; ids and times come from the logical clock; a
restore gives the same items; a library's error is a counted failure and a dead worker one line;
a worker ends when its parent dies; a rollout runs at most --library-workers such users at once."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from memaudit.adapters import environment, registry
from memaudit.adapters.base import AdapterContext, Event
from memaudit.adapters.environment import WorkerDied, declared_environments, python_variable
from memaudit.llm.embed import Embedder
from memaudit.runtime import open_runtime
from memaudit.testing.adapter_contract import EPISODES, hash_encoder, play
from tests.adapters import scratch_environment
from tests.adapters.scratch_environment import NotesMemory

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def scratch_python(monkeypatch):
    """The scratch library's environment is this Python; its worker imports it from the checkout."""
    monkeypatch.setenv(python_variable(scratch_environment.ENVIRONMENT), sys.executable)
    monkeypatch.setenv("PYTHONPATH", str(REPO))


@asynccontextmanager
async def notes_runtime(settings, fake):
    async with open_runtime(settings, transport=fake.transport(), embedder=Embedder(None, encoder=hash_encoder)) as rt:
        yield lambda: NotesMemory(AdapterContext(rt.llm, rt.embedder, scope="run/u1"))


def test_the_worker_writes_searches_and_restores_the_same_items(settings, fake):
    async def main():
        async with notes_runtime(settings, fake) as make:
            first = make()
            await play(first, EPISODES)
            found = await first.search(EPISODES[0][0], 2)
            state, dumped = first.snapshot(), first.dump()
            again = make()
            await play(again, EPISODES)
            restored = make()
            await restored.restore(state)
            for adapter in (first, again, restored):
                await adapter.close()
        assert len(dumped) == sum(1 + len(turns) for _, turns in EPISODES) and found and found[0].content == EPISODES[0][0]
        assert again.dump() == dumped, "ids and times come from the episode's logical clock"
        assert restored.dump() == dumped and restored.snapshot() == state
        assert all(note["at"].startswith("2025-01-0") for note in dumped), "the logical date, not wall time"
    anyio.run(main)


def test_a_restore_draws_the_ids_the_first_run_drew_after_a_search(settings, fake):
    """A search between two writes draws an id; the restore adds the messages alone, from the
    clock each one found: the second message's id is the first run's."""
    async def main():
        async with notes_runtime(settings, fake) as make:
            first = make()
            await first.observe(Event("task_start", "one note", 1, 0))
            await first.search("note", 1)
            await first.observe(Event("task_start", "two notes", 2, 0))
            restored = make()
            await restored.restore(first.snapshot())
            await restored.observe(Event("task_start", "three notes", 3, 0))
            await first.observe(Event("task_start", "three notes", 3, 0))
            await first.close()
            await restored.close()
        assert restored.dump() == first.dump()
    anyio.run(main)


def test_a_library_error_is_a_counted_write_failure_and_a_dead_worker_one_line(settings, fake):
    async def main():
        async with notes_runtime(settings, fake) as make:
            adapter = make()
            await adapter.observe(Event("task_start", "fail", 1, 0))
            assert adapter.write_failures == 1 and adapter.dump() == []
            with pytest.raises(WorkerDied, match="worker process stopped"):
                await adapter.observe(Event("task_start", "exit", 2, 0))
            await adapter.close()
    anyio.run(main)


PARENT = """
import asyncio, sys
from pathlib import Path
from memaudit.adapters.environment import Worker
from tests.adapters.scratch_environment import NotesWorker

async def main():
    worker = await Worker.start(Path(sys.executable), NotesWorker, {"scope": "run/u1"})
    print(worker.process.pid, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def gone_within(pid: int, seconds: float) -> bool:
    """Whether the process has ended (or is a zombie) within the bound, polled."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_worker_ends_when_its_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, cwd=REPO,
                              env={**os.environ})
    try:
        worker = int(parent.stdout.readline())
        assert not gone_within(worker, 0.2), "the worker runs while its parent does"
    finally:
        parent.kill()
        parent.wait(timeout=30)
    assert gone_within(worker, 5), f"worker {worker} outlived its killed parent"


def test_make_install_builds_every_declared_environment():
    assert "cognee" in declared_environments()
    assert scratch_environment.ENVIRONMENT not in declared_environments(), "a test's library is no built-in"


def test_a_rollout_and_its_scoring_run_at_most_library_workers_users_of_such_a_system_at_once(settings, fake,
                                                                                               monkeypatch):
    from memaudit.bench.instances import resolve_bench
    from memaudit.rollout.runner import run_rollout
    from memaudit.scoring.recovery import score_runs

    scratch = registry.Registration("scratchnotes", "tests.adapters.scratch_environment:NotesMemory", "scratch==1")
    builtins = registry.registrations()
    monkeypatch.setattr(registry, "registrations", lambda: (*builtins, scratch))
    live, most = set(), [0]
    start, stop = environment.Worker.start, environment.Worker.stop

    async def counted_start(*args):
        worker = await start(*args)
        live.add(worker)
        most[0] = max(most[0], len(live))
        return worker

    def counted_stop(worker):
        live.discard(worker)
        stop(worker)

    monkeypatch.setattr(environment.Worker, "start", counted_start)
    monkeypatch.setattr(environment.Worker, "stop", counted_stop)

    async def main():
        async with open_runtime(replace(settings, library_workers=1), transport=fake.transport(),
                                embedder=Embedder(None, encoder=hash_encoder)) as rt:
            bench = await resolve_bench(rt.store, "sample")
            runs = await run_rollout(rt, bench, ["scratchnotes"], users=[u.id for u in bench.users[:3]], tasks=1,
                                     max_turns=1)
            assert most[0] == 1 and not live, "one worker at a time, each stopped when its user was done"
            most[0] = 0
            await score_runs(rt, runs, ["retrieve"], ks=(3,))
            assert most[0] == 1 and not live, "scoring restores one user at a time, closed after its last read"
    anyio.run(main)
