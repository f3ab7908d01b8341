"""Adapters under test: a fast deterministic encoder, a runtime on the fake server, a scripted
conversation."""
from __future__ import annotations

import gc
import importlib.util
from contextlib import asynccontextmanager

import pytest

from memaudit.adapters.base import AdapterContext
from memaudit.adapters.registry import get_adapter
from memaudit.errors import MemauditError
from memaudit.llm.embed import Embedder
from memaudit.llm.tools import PROBE_TOOL
from memaudit.runtime import open_runtime
from memaudit.testing.adapter_contract import (EPISODES, QUERIES, events, hash_encoder, play,  # noqa: F401
                                               script)


# The deployed libraries need their optional extras (installed by `make install` and in CI);
# cognee, letta and memos their own environments (.venv-<name>), where each user's library is a worker process.
LIBRARY_MODULES = {"agno": "agno", "mem0ai": "mem0", "graphiti": "graphiti_core", "llamaindex": "llama_index.core", "langmem": "langmem"}
OWN_ENVIRONMENT = ("cognee", "letta", "memos")


@pytest.fixture(autouse=True)
def collect_library_clients():
    """Collect a test's adapters before the next test's event loop runs: a deployed library's
    async HTTP clients, collected inside a later loop, schedule their closing there, on
    connections of a loop that is closed ("Event loop is closed" in an unrelated test)."""
    yield
    gc.collect()


def installed(system: str) -> bool:
    """False for a deployed library that is not installed; True for every other system."""
    if system in OWN_ENVIRONMENT:
        try:
            get_adapter(system)  # its module refuses to load without the library's environment
        except MemauditError:
            return False
        return True
    module = LIBRARY_MODULES.get(system)
    return module is None or importlib.util.find_spec(module.split(".")[0]) is not None


def needs_library(system: str):
    """Skip where the system's library is missing."""
    return pytest.mark.skipif(not installed(system), reason=f"the {system} library is not installed")


def library_marks(system: str) -> list:
    """needs_library; a library in its own environment is also slow (a worker process per user,
    whose start imports the library): its tests are integration tests."""
    return [needs_library(system), *([pytest.mark.integration] if system in OWN_ENVIRONMENT else [])]


needs_mem0ai = needs_library("mem0ai")


def system_params(names) -> list:
    """Systems as test parameters; a deployed library is skipped where it is missing."""
    return [pytest.param(name, marks=library_marks(name)) if name in (*LIBRARY_MODULES, *OWN_ENVIRONMENT) else name
            for name in names]


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


