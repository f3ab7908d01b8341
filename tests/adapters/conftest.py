"""Adapters under test: a fast deterministic encoder, a runtime on the fake server, a scripted
conversation."""
from __future__ import annotations

import functools
import gc
from contextlib import asynccontextmanager

import pytest

from memaudit.adapters.base import AdapterContext
from memaudit.adapters.deployed import DeployedLibrary
from memaudit.adapters.registry import builtin_names, get_adapter
from memaudit.errors import MemauditError
from memaudit.llm.embed import Embedder
from memaudit.llm.tools import PROBE_TOOL
from memaudit.runtime import open_runtime
from memaudit.testing.adapter_contract import (EPISODES, QUERIES, events, hash_encoder, play,  # noqa: F401
                                               script)


@pytest.fixture(autouse=True)
def collect_library_clients(request):
    """After a test marked `library_clients` (one that made a deployed library's adapters), collect
    them before the next test's event loop runs: a library's async HTTP clients, collected inside
    a later loop, schedule their closing there, on connections of a loop that is closed ("Event
    loop is closed" in an unrelated test). Only there: a collection costs ~0.5 s once the
    libraries are loaded."""
    yield
    if request.node.get_closest_marker("library_clients"):
        gc.collect()


@functools.cache
def adapter_class(system: str) -> type | None:
    """The system's adapter class, or None where its library (its extra, its environment) is missing:
    a built-in that does not load lacks its library."""
    try:
        return get_adapter(system)
    except MemauditError:
        return None


def installed(system: str) -> bool:
    """False for a deployed library that is not installed; True for every other system."""
    return adapter_class(system) is not None


def is_library(system: str) -> bool:
    """A deployed library (installed here), declared by its adapter's base class."""
    adapter = adapter_class(system)
    return adapter is not None and issubclass(adapter, DeployedLibrary)


def in_own_environment(system: str) -> bool:
    """A library that runs in an environment of its own (adapters/deployed.py `ENVIRONMENT`)."""
    return getattr(adapter_class(system), "ENVIRONMENT", None) is not None


def deployed_libraries() -> list[str]:
    """The built-in deployed libraries installed here, by name."""
    return [name for name in builtin_names() if is_library(name)]


def needs_library(system: str):
    """Skip where the system's library is missing."""
    return pytest.mark.skipif(not installed(system), reason=f"the {system} library is not installed")


def library_marks(system: str) -> list:
    """needs_library, `library_clients`; a library in its own environment is also slow (a worker
    process per user, whose start imports the library): its tests are integration tests."""
    if not installed(system):
        return [needs_library(system)]
    if not is_library(system):
        return []
    return [pytest.mark.library_clients,
            *([pytest.mark.integration] if in_own_environment(system) else [])]


def system_params(names) -> list:
    """Systems as test parameters, with their library marks (a missing library is skipped)."""
    return [pytest.param(name, marks=library_marks(name)) for name in names]


def library_calls(fake) -> list[dict]:
    """A tool-calling library's requests, the endpoint's one tool check (once a command) left out."""
    return [b for b in fake.requests if PROBE_TOOL not in str(b.get("tools"))]


@asynccontextmanager
async def adapter_runtime(name: str, settings, fake, *, window: int | None = None):
    """(adapter factory, runtime): the factory makes fresh adapters sharing one scope and embedder."""
    embedder = Embedder(None, encoder=hash_encoder)
    async with open_runtime(settings, transport=fake.transport(), embedder=embedder) as rt:
        def make():
            return get_adapter(name)(AdapterContext(rt.llm, rt.embedder, scope="run/u1",
                                                    agent_context_window=window))
        yield make, rt


