"""What the deployed-library adapters share (adapters/upstream.py `guarded`): a model failure is a
counted, skipped write; a cache miss or a broken endpoint ends the command, whether the library
raised it or caught it and went on; httpx2 is whole in sys.modules before a library calls the proxy."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from contextlib import contextmanager

import anyio
import pytest

from memaudit.adapters.library_clock import LibraryClock
from memaudit.adapters.memory_calls import FailureLog
from memaudit.adapters.upstream import guarded
from memaudit.errors import CacheMiss, EndpointError, InvalidOutput

ROLE = "memory:somelib"


class Route:
    error = None
    tool_requests = tool_answers = 0  # the proxy's count of `auto` tool requests and those that got a call

    @contextmanager
    def calls_from_here(self):
        self.error = None
        yield self


class Adapter:
    def __init__(self):
        self.clock, self.failures = LibraryClock("run/u1"), FailureLog()


def library(route, failure, *, swallowed: bool):
    """A library call whose model call failed with `failure`: raised, or caught and gone on from."""
    async def call():
        route.error = failure
        if not swallowed:
            raise RuntimeError("the library's own error for a 400")
        return "went on"
    return call


def test_a_model_failure_the_library_raised_is_a_counted_skipped_write():
    adapter, route = Adapter(), Route()
    failure = InvalidOutput(ROLE, "", "the request requires a tool call and the answer made none")
    assert anyio.run(guarded, adapter, ROLE, route, library(route, failure, swallowed=False)) is None
    assert adapter.failures.write_failures == 1 and adapter.failures.entries[0]["error"] == "InvalidOutput"


@pytest.mark.parametrize("failure", [CacheMiss(ROLE, "s1:abc"), EndpointError("the endpoint ignores `tools`")])
@pytest.mark.parametrize("swallowed", [False, True], ids=["raised", "caught by the library"])
def test_a_cache_miss_or_a_broken_endpoint_ends_the_command(failure, swallowed):
    adapter, route = Adapter(), Route()
    with pytest.raises(type(failure)):
        anyio.run(guarded, adapter, ROLE, route, library(route, failure, swallowed=swallowed))
    assert adapter.failures.write_failures == 0


@pytest.mark.skipif(importlib.util.find_spec("httpx2") is None, reason="httpx2 is not installed")
def test_httpx2_is_imported_whole_with_the_library_adapters():
    """openai's clients look httpx2 up in sys.modules; the local sentence model imports it in a
    worker thread on first use: half-imported then, it failed a library's concurrent call (a lost
    write a replay did not lose). A fresh process, as a command starts."""
    probe = ("import sys, memaudit.adapters.upstream; m = sys.modules.get('httpx2'); "
             "print(all(hasattr(m, name) for name in ('URL', 'Timeout', 'AsyncClient')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr


def test_tool_requests_that_never_got_a_call_are_lost_writes_until_one_does():
    """Issue 42: a library leaving the tool choice to the model, on a model that never calls, stored
    nothing without a failure; each such request counts as a lost write while none got a call."""
    adapter, route = Adapter(), Route()

    def asking(calls: int):
        async def call():
            route.tool_requests += 2
            route.tool_answers += calls
        return call
    anyio.run(guarded, adapter, ROLE, route, asking(0))
    state = adapter.failures.to_state()
    assert state["write_failures"] == 2 and adapter.failures.lost == 2
    restored = FailureLog()
    restored.load_state(state)
    assert restored.to_state() == state  # a restored adapter (a new route) counts on from the snapshot
    anyio.run(guarded, adapter, ROLE, route, asking(1))  # the model can call: no request was lost for that
    assert adapter.failures.to_state()["write_failures"] == 0
    assert "tool_requests" not in FailureLog().to_state()  # other systems' snapshots stay as they were
