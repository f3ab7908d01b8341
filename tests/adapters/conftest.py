"""Adapters under test: a fast deterministic encoder, a runtime on the fake server, a scripted
conversation."""
from __future__ import annotations

import functools
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

# What a library is given of the first contract episode: its task and each user reply, in order.
FIRST_USER_MESSAGES = [EPISODES[0][0], *(user for _, user in EPISODES[0][1])]


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
    """needs_library; a library in its own environment is slow (a worker process per user, whose
    start imports the library): its tests are integration tests. (The libraries' HTTP clients are
    collected after any test that made one: tests/conftest.py `collect_clients`.)"""
    if not installed(system):
        return [needs_library(system)]
    if not is_library(system):
        return []
    return [pytest.mark.integration] if in_own_environment(system) else []


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


