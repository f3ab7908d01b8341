"""What the adapters over deployed libraries share (graphiti, llamaindex, cognee): their calls run
on the episode's logical clock (adapters/library_clock.py) so that their model calls count with
the episode, and a model failure, or an answer the library cannot use, is a counted, skipped
write."""
from __future__ import annotations

from memaudit.adapters.memory_calls import MODEL_FAILURES
from memaudit.errors import MemauditError

# How long a library waits for the recording proxy. The proxy answers once memaudit's client has,
# with its own timeouts and retries; a library's own shorter timeout (LlamaIndex's clients: 60 s)
# would turn a busy local embedder or a queue at the endpoint into a lost write or an empty search,
# depending on timing.
PROXY_TIMEOUT = 24 * 3600.0


async def guarded(adapter, role: str, route, call):
    """Await a library call (a coroutine function of no arguments) with its model calls counted
    with the caller's artifact. A model failure, or the library failing on an answer it could not
    use, is counted in the adapter's write failures and gives None; a cache miss under `--cache
    replay` or an unreachable endpoint propagates."""
    with route.calls_from_here(), adapter.clock.running():
        try:
            return await call()
        except Exception as exc:
            cause = route.error or exc
            if isinstance(cause, MemauditError) and not isinstance(cause, MODEL_FAILURES):
                raise cause from None
            adapter.failures.record(role, adapter.clock.clock, cause)
            return None


def count_problems(adapter, problems: list) -> None:
    """Count what a library swallowed (failed calls, answers it could not use) as write failures;
    a cache miss or an unreachable endpoint among them propagates."""
    for problem in problems:
        cause = problem if isinstance(problem, MemauditError) else adapter.route.error or problem
        if isinstance(cause, MemauditError) and not isinstance(cause, MODEL_FAILURES):
            raise cause from None
        adapter.failures.record(adapter.route.role, adapter.clock.clock, cause)
