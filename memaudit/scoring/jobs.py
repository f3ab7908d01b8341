"""The job runner every scoring-side command shares (score, rescore, attribute, judge-check,
utilization, the evolving criteria): one job per target, all in one task group.

Under `--batch` a call that misses the cache raises BatchPending once its request is recorded
(memaudit/llm/batch.py): the job writes nothing for it, and the command's next run, after the batch
is collected, finds the answer in the cache."""
from __future__ import annotations

from typing import Awaitable, Callable, Iterable

import anyio

from memaudit.errors import MemauditError
from memaudit.llm.batch import BatchPending
from memaudit.store import Store


async def run_all(store: Store, jobs: list[Callable[[], Awaitable[None]]]) -> None:
    """Run the jobs of every pass of a command (runs, modes, k values) in one task group: they share
    the client's pool of in-flight calls. Then commit what they queued. A MemauditError in any job
    (e.g. a cache miss under replay) is raised as itself, not wrapped in an exception group."""
    try:
        async with anyio.create_task_group() as tg:
            for job in jobs:
                tg.start_soon(_unless_pending, job)
    except BaseExceptionGroup as group:
        first = _first_memaudit_error(group)
        if first is None:
            raise
        raise first from None
    finally:
        with anyio.CancelScope(shield=True):  # finished rows are kept even when the command fails
            await store.flush()


async def _unless_pending(job: Callable[[], Awaitable[None]]) -> None:
    """Under `--batch` a job whose call waits for a batch result writes nothing: it is not a
    failure, and a later run scores the target from the cache (memaudit/llm/batch.py)."""
    try:
        await job()
    except BatchPending:
        pass


async def each_recorded(steps: Iterable[Callable[[], Awaitable[None]]]) -> None:
    """Run a job's independent steps in turn. Under `--batch` one that waits for a batch result does
    not stop the next, so every step's call goes out in the same round; then the job waits too."""
    waiting = None
    for step in steps:
        try:
            await step()
        except BatchPending as pending:
            waiting = waiting or pending
    if waiting is not None:
        raise waiting


def _first_memaudit_error(group: BaseExceptionGroup) -> MemauditError | None:
    for exc in group.exceptions:
        if isinstance(exc, MemauditError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_memaudit_error(exc)
            if found is not None:
                return found
    return None
