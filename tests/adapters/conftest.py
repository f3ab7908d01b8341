"""Adapters under test: a fast deterministic encoder, a runtime on the fake server, a scripted
conversation."""
from __future__ import annotations

import importlib.util
from contextlib import asynccontextmanager

import pytest

from memaudit.adapters.base import AdapterContext
from memaudit.adapters.registry import get_adapter
from memaudit.llm.embed import Embedder
from memaudit.runtime import open_runtime
from memaudit.testing.adapter_contract import (EPISODES, QUERIES, events, hash_encoder, play,  # noqa: F401
                                               script)


# The deployed libraries need their optional extras (installed by `make install` and in CI).
LIBRARY_MODULES = {"mem0ai": "mem0", "graphiti": "graphiti_core", "llamaindex": "llama_index.core"}


def installed(system: str) -> bool:
    """False for a deployed library whose extra is not installed; True for every other system."""
    module = LIBRARY_MODULES.get(system)
    return module is None or importlib.util.find_spec(module.split(".")[0]) is not None


def needs_library(system: str):
    """Skip where the system's library is missing."""
    return pytest.mark.skipif(not installed(system), reason=f"the {system} extra is not installed")


needs_mem0ai = needs_library("mem0ai")


def system_params(names) -> list:
    """Systems as test parameters; a deployed library is skipped where it is missing."""
    return [pytest.param(name, marks=needs_library(name)) if name in LIBRARY_MODULES else name for name in names]


@asynccontextmanager
async def adapter_runtime(name: str, settings, fake, *, window: int | None = None):
    """(adapter factory, runtime): the factory makes fresh adapters sharing one scope and embedder."""
    embedder = Embedder(None, encoder=hash_encoder)
    async with open_runtime(settings, transport=fake.transport(), embedder=embedder) as rt:
        def make():
            return get_adapter(name)(AdapterContext(rt.llm, rt.embedder, scope="run/u1",
                                                    agent_context_window=window))
        yield make, rt


