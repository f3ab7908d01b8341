"""`langmem`: LangChain's LangMem (langmem==0.0.30, `pip install 'memaudit-bench[langmem]'`), its
memory manager on LangGraph's in-memory store, audited as it ships.

- `create_memory_store_manager` with its defaults (its own instructions, free-text `Memory` items,
  inserts and updates, no deletes, the 5 nearest memories shown to each update, its namespace per
  user) over an `InMemoryStore` indexed as its documentation configures it (the whole stored value
  embedded); one manager and one store per user.
- Its chat model (`ChatOpenAI`, chat completions) and its embeddings (`OpenAIEmbeddings`) point at
  memaudit's recording proxy: every call goes through memaudit's client under `memory:langmem`,
  cached, counted, replayable. The manager works by tool calls (several per answer, through
  trustcall), which the proxy forwards or emulates as the `memory` role's dialect says.
- Deterministic: the ids and times it draws (memory ids, the session tag in its prompt, the store's
  timestamps) come from the episode's logical clock. Tracing is off; nothing is downloaded.

What it is given follows the published study: each message from the user (the task text and each
reply), as a conversation of that one message. `search` is the manager's own search (the store's
cosine ranking, with its scores). `dump` is every item of the user's namespace: its key, the
memory's text, its kind and the store's times. A tool call the library drops because it cannot use
it is a counted write failure."""
from __future__ import annotations

import asyncio
from datetime import datetime

import orjson
from pydantic import PrivateAttr

from memaudit.adapters.card import CardRow, field_default, keyword_default
from memaudit.adapters.deployed import DeployedLibrary, RefilledStore, upstream_imports
from memaudit.adapters.library_clock import EPOCH, patch_modules
from memaudit.adapters.upstream import count_problems, dropped_answers, watch_dropped_answers
from memaudit.errors import BadInput
from memaudit.types import MemoryItem

CONFIG = {"configurable": {"langgraph_user_id": "user"}}  # fills the manager's namespace template
KIND = "Memory"  # the manager's default schema, the only kind it writes here
# Every switch LangSmith reads before it traces (its telemetry): all off, whatever the environment says.
TELEMETRY = dict.fromkeys(("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING", "LANGCHAIN_TRACING_V2"),
                          "false")
# trustcall, the manager's tool-calling engine, drops a tool call it cannot use (arguments its schema
# refuses after its own repair attempts, a patch it cannot apply, a patch of a memory it was not
# shown) and goes on with only a line on this logger: each such line is a lost write.
DROPS_LOGGER = "extraction"


with upstream_imports("langmem", telemetry=TELEMETRY):
    import langgraph.store.memory
    import langmem.knowledge.extraction
    import trustcall._base
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings
    from langgraph.store.memory import InMemoryStore
    from langmem import create_memory_store_manager
for _module in (langmem.knowledge.extraction, trustcall._base, langgraph.store.memory):
    patch_modules(_module.__name__)


class InTurnEmbeddings(OpenAIEmbeddings):
    """OpenAIEmbeddings answering one request at a time, first come first served. The manager
    puts a write's memories concurrently (`asyncio.gather`), and the store files each put, with
    its timestamp, when that put's embedding comes back: in turn, the order (and the times) are
    the order of the manager's puts, the same in every run and replay."""

    _turn: asyncio.Lock = PrivateAttr(default_factory=asyncio.Lock)

    async def aembed_documents(self, texts, chunk_size=None, **kwargs):  # aembed_query comes here too
        async with self._turn:
            return await super().aembed_documents(texts, chunk_size, **kwargs)


class LangMemMemory(RefilledStore, DeployedLibrary):
    name = "langmem"
    ITEM_KIND = "memory"
    library = "langmem"
    TELEMETRY = TELEMETRY
    TOOL_CALLING = True
    # measured on the contract's fake: one manager call a message (8 for its 7 user
    # messages: the first is the endpoint's tool check, once a command)
    CALLS_PER_MESSAGE = 1.0

    def __init__(self, ctx):
        super().__init__(ctx)
        self.store = None  # the manager's store

    # -- the library ---------------------------------------------------------------------------
    async def open(self, endpoint):
        model = ChatOpenAI(model=endpoint.model, base_url=endpoint.base_url, api_key=endpoint.key,
                           max_retries=endpoint.max_retries, timeout=endpoint.timeout, use_responses_api=False)
        # The embeddings' length check counts tokens with a tiktoken encoding, which tiktoken
        # downloads on first use: off (memaudit's embedder takes the texts as they are).
        embeddings = InTurnEmbeddings(model=endpoint.embed_model, base_url=endpoint.base_url, api_key=endpoint.key,
                                      check_embedding_ctx_length=False, max_retries=endpoint.max_retries,
                                      timeout=endpoint.timeout)
        self.store = InMemoryStore(index={"dims": await self.dimensions(), "embed": embeddings})
        return create_memory_store_manager(model, store=self.store)

    @classmethod
    def card_rows(cls) -> list[CardRow]:
        manager = create_memory_store_manager
        return [
            CardRow("memory manager", "create_memory_store_manager", "the same, with its defaults", "as shipped"),
            *(CardRow(f"manager {name}", str(default), "the library's", "as shipped", keyword_default(manager, name))
              for name, default in (("enable_inserts", True), ("enable_deletes", False), ("query_limit", 5))),
            CardRow("store", "the caller's", "InMemoryStore indexed on the whole value (dims, embed)",
                    "its documentation's configuration, one per user"),
            CardRow("ChatOpenAI use_responses_api", "None", "False (chat completions)",
                    "None lets the client pick the Responses API per request; its tool calls go as chat completions, "
                    "which the proxy forwards or emulates per dialect (its /v1/responses takes no tools)",
                    field_default(ChatOpenAI, "use_responses_api")),
            CardRow("OpenAIEmbeddings check_embedding_ctx_length", "True", "False",
                    "the check counts tokens with a tiktoken encoding tiktoken would download; memaudit's embedder "
                    "takes the texts, its own cuts counted (embed_truncated)",
                    field_default(OpenAIEmbeddings, "check_embedding_ctx_length")),
            CardRow("embedding requests", "concurrent", "one at a time (first come, first served)",
                    "the store stamps each put when its embedding returns: in turn, order and times are the "
                    "manager's, the same in every run and replay"),
            CardRow("search limit", "10", "k", "the audit reads k items", keyword_default(InMemoryStore.asearch, "limit")),
            CardRow("dropped tool calls", "a log line (trustcall)", "counted as write failures",
                    "a lost write must not pass for a memory that kept nothing"),
        ]

    # -- write path ----------------------------------------------------------------------------
    async def add(self, event) -> None:
        manager = await self.opened()
        with dropped_answers() as dropped:
            await self.guarded(lambda: manager.ainvoke(
                {"messages": self.said(event)}, config=CONFIG))
        count_problems(self, dropped)
        self.stored = await self._read()

    # -- read paths ----------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        manager = await self.opened()
        found = await self.guarded(lambda: manager.asearch(query=query, limit=k, config=CONFIG))
        items = []
        for result in found or []:
            item = stored_item(result)
            items.append(MemoryItem(item.pop("id"), item.pop("content"), result.score, item))
        return items

    async def _read(self) -> list[dict]:
        """Every item of the user's namespace, in the order the store keeps them (a search
        without a query embeds nothing)."""
        return [stored_item(item) for item in await self.instance.asearch(limit=1_000_000, config=CONFIG)]

    # -- state (snapshot and restore: deployed.RefilledStore) ---------------------------------
    async def load_items(self, items: list[dict]) -> None:
        """A dumped store (ours, or any items with `content`), each a `Memory` of the manager; items
        without times get the logical date of task 1."""
        stored = []
        for n, item in enumerate(items, 1):
            if not isinstance(item, dict) or not isinstance(item.get("content"), str):
                raise BadInput(f"memory {n} needs a string 'content'", field="content")
            stored.append({"id": str(item.get("id") or f"memory-{n}"), "content": item["content"],
                           "created_at": item.get("created_at") or EPOCH.isoformat(),
                           "updated_at": item.get("updated_at") or EPOCH.isoformat()})
        await self._refill(stored)

    async def _refill(self, stored: list[dict]) -> None:
        """The store filled with dumped items by its own puts (embedded as it embeds them, from
        the cache), then given back their recorded times."""
        manager = await self.opened()
        namespace = manager.get_namespace(CONFIG)
        with self.route.calls_from_here():
            try:
                # One put an item, as the manager puts them: a batch of puts embeds its distinct
                # texts once each but indexes every put, and fails on two equal values.
                for item in stored:
                    await self.store.aput(namespace, item["id"], {"kind": KIND, "content": {"content": item["content"]}})
            except Exception as exc:
                raise (self.route.error or exc) from None
        # The store stamps each put with the time of the put; the recorded times go back where it
        # keeps its items (`_data`, a name its documentation asks to keep).
        kept = self.store._data[namespace]
        for item in stored:
            kept[item["id"]].created_at = datetime.fromisoformat(item["created_at"])
            kept[item["id"]].updated_at = datetime.fromisoformat(item["updated_at"])
        self.stored = await self._read()


def stored_item(found) -> dict:
    """A store item of the manager (its value a `Memory`) in the dump's shape."""
    native = found.dict()  # langmem's own item, its value as JSON
    text = native["value"].get("content")
    return {"id": found.key, "content": text if isinstance(text, str) else orjson.dumps(native["value"]).decode(),
            # the manager's schema of the value (its own `kind` field; memaudit's `kind` is ITEM_KIND)
            "schema": type(found.value).__name__, "created_at": native["created_at"],
            "updated_at": native["updated_at"]}


watch_dropped_answers(DROPS_LOGGER, LangMemMemory.ROLE)
