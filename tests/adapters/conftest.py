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


# The mem0ai system needs its optional extra (installed by `make install` and in CI).
HAS_MEM0AI = importlib.util.find_spec("mem0") is not None
needs_mem0ai = pytest.mark.skipif(not HAS_MEM0AI, reason="the mem0ai extra is not installed")


def system_params(names) -> list:
    """Systems as test parameters; mem0ai is skipped where its library is missing."""
    return [pytest.param(name, marks=needs_mem0ai) if name == "mem0ai" else name for name in names]


@asynccontextmanager
async def adapter_runtime(name: str, settings, fake, *, window: int | None = None):
    """(adapter factory, runtime): the factory makes fresh adapters sharing one scope and embedder."""
    embedder = Embedder(None, encoder=hash_encoder)
    async with open_runtime(settings, transport=fake.transport(), embedder=embedder) as rt:
        def make():
            return get_adapter(name)(AdapterContext(rt.llm, rt.embedder, scope="run/u1",
                                                    agent_context_window=window))
        yield make, rt


