"""What the adapters over deployed libraries share (graphiti, llamaindex, cognee): their calls run
on the episode's logical clock (adapters/library_clock.py) so that their model calls count with
the episode, and a model failure, or an answer the library cannot use, is a counted, skipped
write."""
from __future__ import annotations

from memaudit.adapters.indexed import deep_copy
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
    replay` or an unreachable endpoint propagates, also when the library caught it and went on
    (a replay would otherwise go on with another memory, or a broken endpoint pass for an empty one)."""
    with route.calls_from_here(), adapter.clock.running():
        try:
            result = await call()
        except Exception as exc:
            cause = route.error or exc
            if _fatal(cause):
                raise cause from None
            adapter.failures.record(role, adapter.clock.clock, cause)
            return None
    if _fatal(route.error):
        raise route.error
    return result


def _fatal(cause) -> bool:
    """A memaudit error that is not a model failure: it ends the command, never counts as a lost write."""
    return isinstance(cause, MemauditError) and not isinstance(cause, MODEL_FAILURES)


def count_problems(adapter, problems: list) -> None:
    """Count what a library swallowed (failed calls, answers it could not use) as write failures;
    a cache miss or an unreachable endpoint among them propagates."""
    for problem in problems:
        cause = problem if isinstance(problem, MemauditError) else adapter.route.error or problem
        if _fatal(cause):
            raise cause from None
        adapter.failures.record(adapter.route.role, adapter.clock.clock, cause)


class ReplayedMessages:
    """For an adapter (a MemoryAdapter with a `clock`) over a library whose store has no form the
    library reads back (a graph database, another process): what the published study gives it —
    each user message (the task text and each reply) — goes to `add_message`, and its state is
    those messages, added again in order on restore, every call answered from the cache. The
    snapshot's failure counts and clock are the first run's: replayed failures are not counted
    twice."""

    SOURCE = ("task_start", "user")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.added: list[list] = []  # [clock, task index, turn, text] of every message given to it

    async def add_message(self, clock: str, task_index: int, turn: int, text: str) -> None:
        raise NotImplementedError

    async def observe(self, event) -> None:
        if event.kind not in self.SOURCE:
            return
        self.added.append([event.clock, event.task_index, event.turn, event.text])
        await self.add_message(event.clock, event.task_index, event.turn, event.text)

    def snapshot(self) -> dict:
        return deep_copy({**self.state_header(), "clock": self.clock.to_state(), "added": self.added})

    async def restore(self, state: dict) -> None:
        state = deep_copy(state)
        for clock, task_index, turn, text in state["added"]:
            await self.add_message(clock, task_index, turn, text)
        self.load_header(state)
        self.clock.load_state(state["clock"])
        self.added = state["added"]
