"""What a command that touches the store or a model needs, opened and closed in one place:
the store, the model client and the embedder. When no endpoint is configured, the embedded model
server is started on the first call that misses the cache and stopped when the command ends, so a
fully cached command (a second `make run`, `memaudit replay`) never starts it. If the server's
process exits while the command runs, the command fails at once naming its exit signal and log."""
from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Callable

from memaudit.config import Settings
from memaudit.llm.client import LLM
from memaudit.llm.embed import Embedder, configured_embedder
from memaudit.llm.proxy import close_proxy
from memaudit.llm.server import embedded_server
from memaudit.store import Store, open_store
from memaudit.shards import WHOLE, Shard

if TYPE_CHECKING:  # a test's MockTransport; commands never import httpx
    import httpx


@dataclass
class Runtime:
    settings: Settings
    store: Store
    llm: LLM
    make_embedder: Callable[[], Embedder]
    shard: Shard = WHOLE  # the (system, user) cells this command works on (memaudit/shards.py)

    @cached_property
    def embedder(self) -> Embedder:
        """Made when a memory system first needs it: a command that builds none (generate, attribute,
        judge-check) reads no embedding setting, so it takes none (memaudit/cli/common.py)."""
        return self.make_embedder()


@asynccontextmanager
async def open_runtime(settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None,
                       embedder: Embedder | None = None, create: bool = True, shard: Shard | None = None):
    """`create=False`: the command works on what a store holds (score, attribute): no store at
    settings.db is a one-line error, and no file is made. `shard`: only these (system, user) cells
    (None: all of them); its requests and tokens per minute are the shard's share of the budget."""
    if shard is not None:
        settings = replace(settings, rate_share=shard.count)
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(open_store(settings.db, create=create))

        async def start_server() -> str:
            log = settings.db.parent / "memaudit-server.log"
            server = await stack.enter_async_context(embedded_server(log_path=log))
            # If the server dies mid-command (a crash, the OOM killer), the next failed request
            # says so at once instead of retrying a dead port.
            llm.transport.watched[server.url] = server.check_alive
            return server.url

        on_demand = start_server if settings.embedded and transport is None and settings.cache != "replay" else None
        llm = LLM(settings, store.calls, transport=transport, start_server=on_demand)
        stack.push_async_callback(llm.aclose)
        stack.push_async_callback(close_proxy, llm)  # before the client it forwards to
        yield Runtime(llm.settings, store, llm,
                      lambda: embedder or configured_embedder(store.vectors, settings, llm.transport), shard or WHOLE)
