"""What the deployed-library adapters share (adapters/upstream.py `guarded`): a model failure is a
counted, skipped write; a cache miss or a broken endpoint ends the command, whether the library
raised it or caught it and went on."""
from __future__ import annotations

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
