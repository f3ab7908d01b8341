"""What a command that touches the store or a model needs, opened and closed in one place:
the store, the model client (with the embedded server started when no endpoint is configured)
and the embedder."""
from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from memaudit.config import Settings
from memaudit.embed import Embedder
from memaudit.llm.client import LLM
from memaudit.llm.server import embedded_server
from memaudit.store import Store, open_store

OFFLINE_URL = "http://127.0.0.1:9/v1"  # never contacted: replay answers from the cache only


@dataclass
class Runtime:
    settings: Settings
    store: Store
    llm: LLM
    embedder: Embedder


@asynccontextmanager
async def open_runtime(settings: Settings, *, needs_model: bool = True,
                       transport: httpx.AsyncBaseTransport | None = None, embedder: Embedder | None = None):
    async with open_store(settings.db) as store:
        if settings.embedded and needs_model and transport is None and settings.cache != "replay":
            log = settings.db.parent / "memaudit-server.log"
            async with embedded_server(log_path=log) as url:
                async with _runtime(settings.with_embedded_url(url), store, None, embedder) as rt:
                    yield rt
            return
        if settings.embedded:
            settings = settings.with_embedded_url(OFFLINE_URL)
        async with _runtime(settings, store, transport, embedder) as rt:
            yield rt


@asynccontextmanager
async def _runtime(settings, store, transport, embedder):
    llm = LLM(settings, store, transport=transport)
    try:
        yield Runtime(settings, store, llm, embedder or Embedder(store))
    finally:
        await llm.aclose()
        await store.flush()
