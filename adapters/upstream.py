"""The proxy side of the adapters over deployed libraries (their base class: adapters/deployed.py):
one recording-proxy route each; their calls run on the episode's logical clock
(adapters/library_clock.py) so that their model calls count with the episode; a model failure, or
an answer the library cannot use, is a counted, skipped write."""
from __future__ import annotations

import importlib
import importlib.util
import logging
from contextlib import contextmanager
from contextvars import ContextVar

from memaudit.adapters.memory_calls import MODEL_FAILURES
from memaudit.errors import BadInput, InvalidOutput, MemauditError
from memaudit.llm.proxy import recording_proxy

# How long a library waits for the recording proxy. The proxy answers once memaudit's client has,
# with its own timeouts and retries; a library's own shorter timeout (LlamaIndex's clients: 60 s)
# would turn a busy local embedder or a queue at the endpoint into a lost write or an empty search,
# depending on timing.
PROXY_TIMEOUT = 24 * 3600.0
PROXY_KEY = "memaudit-proxy"  # the API key a library sends the proxy: any will do


def import_httpx2_whole() -> None:
    """openai's clients, which the libraries call the proxy with, look httpx2 up in sys.modules
    (outside the import lock) to tell its clients, URLs and timeouts apart. The local sentence
    model imports httpx2 (through huggingface_hub) in the embedder's worker thread on first use: a
    library call made meanwhile met the half-imported module and failed (AttributeError), a write
    lost or not depending on timing, which a replay, with every vector cached, did not lose.
    Imported whole with these adapters, before anything runs, it is never seen half-made."""
    if importlib.util.find_spec("httpx2") is not None:
        importlib.import_module("httpx2")


import_httpx2_whole()


async def library_route(adapter, role: str):
    """The recording-proxy route of a library's model and embedding calls. A library that models
    its writes needs the model client, which a command that only searches a dumped store does not
    have: refused in one line."""
    if adapter.ctx.llm is None:
        raise BadInput(f"the {adapter.name} system needs a model client", field="systems")
    return (await recording_proxy(adapter.ctx.llm)).route(role, adapter.embedder)


async def embedding_dimensions(adapter) -> int:
    """The length of the adapter's vectors, which a library's vector store is configured with."""
    return len((await adapter.embedder.embed([f"{adapter.name} dimension probe"]))[0])


async def guarded(adapter, role: str, route, call):
    """Await a library call (a coroutine function of no arguments) with its model calls counted
    with the caller's artifact. A model failure, or the library failing on an answer it could not
    use, is counted in the adapter's write failures and gives None; a cache miss under `--cache
    replay` or an unreachable endpoint propagates, also when the library caught it and went on
    (a replay would otherwise go on with another memory, or a broken endpoint pass for an empty one)."""
    asked, answered = route.tool_requests, route.tool_answers
    try:
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
    finally:  # the tool requests of this call, kept in the adapter's state (a restored adapter has a new route)
        adapter.failures.tools(route.tool_requests - asked, route.tool_answers - answered)


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


_dropped: ContextVar["list | None"] = ContextVar("memaudit_library_drops", default=None)


class DroppedAnswers(logging.Handler):
    """A library that drops an answer it cannot use (unparseable JSON, a tool call its schema
    refuses) and goes on with only a log line: each such line, collected for the write running in
    this context (`dropped_answers`), is a lost write, counted instead of printed."""

    def __init__(self, role: str, said: str = ""):
        super().__init__(logging.WARNING)
        self.role, self.said = role, said

    def emit(self, record: logging.LogRecord) -> None:
        found, message = _dropped.get(), record.getMessage()
        if found is not None and message.startswith(self.said):
            found.append(InvalidOutput(self.role, "", f"the library dropped an answer: {message}"))


def watch_dropped_answers(logger: str, role: str, said: str = "") -> None:
    """Count the lines of `logger` (those starting with `said`) that report a dropped answer;
    the logger then prints none (a command's output stays one line a fact)."""
    watched = logging.getLogger(logger)
    if not any(isinstance(handler, DroppedAnswers) for handler in watched.handlers):
        watched.addHandler(DroppedAnswers(role, said))
    watched.propagate = False


@contextmanager
def dropped_answers():
    """The answers the library reports dropping while this block runs (`watch_dropped_answers`)."""
    found: list = []
    token = _dropped.set(found)
    try:
        yield found
    finally:
        _dropped.reset(token)
