"""`mem0ai`: the upstream Mem0 library (`pip install 'memaudit-bench[mem0ai]'`, mem0ai==2.2.1),
audited as it ships, with its own prompts and pipeline.

- Its LLM is pointed at memaudit's recording proxy (`memaudit/llm/proxy.py`), so every call it
  makes goes through memaudit's client under the role `memory:mem0ai`: cached, counted, replayable.
  It is sent as mem0 sends it: its own temperature and top_p, its `json_object` extraction request
  (no schema of ours), read by its own parser; an answer that parser drops (it logs the error
  and keeps nothing) is a counted write failure.
- Its embedder is memaudit's (the bundled sentence model by default, `--embed-model` otherwise),
  served through the proxy's `/v1/embeddings` and cached in the store.
- Its vector store is an in-process Qdrant (`:memory:`), its history an in-memory SQLite; one
  library instance per user; telemetry is off.
- Deterministic: the ids and timestamps it creates, and the dates its prompts show, come from the
  episode's logical clock (the library's `uuid4` and `datetime.now` are answered from it while
  the adapter calls into the library).

What it stores follows the published study: each message from the user (the task text and each
reply) is added as one user message; assistant replies are never added. `search` is the library's
search (top-k with its scores); `dump` its `get_all`, shaped like the published dump. The state is
the library's stored points (memories and the entities it links them to, re-embedded on restore
from the cache), its recent-messages table and the adapter's clock counters."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import tempfile
import uuid
import warnings

import anyio

from memaudit.adapters.card import OFF, CardRow, keyword_default
from memaudit.adapters.deployed import DeployedLibrary, quiet_loggers, upstream_imports
from memaudit.adapters.indexed import deep_copy
from memaudit.adapters.library_clock import patch_modules
from memaudit.adapters.mem0_library import TELEMETRY, USER, shaped
from memaudit.adapters.upstream import count_problems, dropped_answers, watch_dropped_answers
from memaudit.errors import BadInput
from memaudit.types import MemoryItem

# The library logs an extraction answer its parser cannot read here, and keeps nothing.
DROPS_LOGGER, DROPPED = "mem0.memory.main", "Error parsing extraction response"
# Where its extraction prompt puts the messages to remember (the contract fake answers those calls).
NEW_MESSAGES = "## New Messages\n"

# Its notices about optional extras (spaCy, fastembed) and local Qdrant, and its folder (which it
# makes when imported) out of the user's home.
quiet_loggers({"mem0": logging.ERROR})
warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
os.environ.setdefault("MEM0_DIR", os.path.join(tempfile.gettempdir(), "memaudit-mem0"))
with upstream_imports("mem0ai", telemetry=TELEMETRY):
    import mem0.configs.llms.base
    import mem0.configs.prompts
    import mem0.memory.main
    import mem0.memory.storage
    from mem0 import Memory
for _module in (mem0.memory.main, mem0.memory.storage, mem0.configs.prompts):  # the ones that draw ids and times
    patch_modules(_module.__name__)


class Mem0AI(DeployedLibrary):
    name = "mem0ai"
    ITEM_KIND = "memory"
    library = "mem0ai"
    TELEMETRY = TELEMETRY
    CALLS_PER_MESSAGE = 1.0  # its extraction, measured on the contract's fake: 7 calls for its 7 user messages

    def __init__(self, ctx):
        super().__init__(ctx)
        self.threads = None  # the worker-thread limiter of this adapter's library calls

    # -- the library ---------------------------------------------------------------------------
    async def open(self, endpoint):
        from qdrant_client import QdrantClient
        config = {
            "llm": {"provider": "openai", "config": {
                "model": endpoint.model, "api_key": endpoint.key, "openai_base_url": endpoint.base_url}},
            "embedder": {"provider": "openai", "config": {
                "model": endpoint.embed_model, "api_key": endpoint.key, "openai_base_url": endpoint.base_url}},
            "vector_store": {"provider": "qdrant", "config": {
                "collection_name": "mem0", "embedding_model_dims": await self.dimensions(),
                "client": QdrantClient(location=":memory:")}},
            "history_db_path": ":memory:",
        }
        # The library's threads wait on the proxy, whose embeddings need a worker thread of the
        # default pool: with their own limiter, many users' library calls cannot starve it.
        self.threads = anyio.CapacityLimiter(1)
        return await anyio.to_thread.run_sync(Memory.from_config, config, limiter=self.threads)

    async def _call(self, fn, *args, **kwargs):
        """A library call in a worker thread (which sees the logical clock: the thread runs in a
        copy of the caller's context), guarded."""
        return await self.guarded(lambda: anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs),
                                                                   limiter=self.threads))

    @classmethod
    def card_rows(cls) -> list[CardRow]:
        llm = mem0.configs.llms.base.BaseLlmConfig
        return [
            CardRow("llm temperature", "0.1", "0.1 (the library's)", "sent as mem0 sends it; the published integration "
                    "set 0 (issue 41)", keyword_default(llm.__init__, "temperature")),
            CardRow("llm top_p", "0.1", "0.1 (the library's)", "sent as mem0 sends it: the proxy forwards every "
                    "sampling parameter", keyword_default(llm.__init__, "top_p")),
            CardRow("llm max_tokens", "2000", "2000 (the library's)", "as shipped", keyword_default(llm.__init__,
                                                                                                  "max_tokens")),
            CardRow("extraction response format", "json_object (its prompt gives the format)", "json_object as sent",
                    "no schema of ours: its own parser reads the answer; an answer it drops (logged, nothing kept) is "
                    "a counted write failure"),
            CardRow("infer", "True", "True (the library's)", "its extraction runs on every add",
                    keyword_default(Memory.add, "infer")),
            CardRow("vector store", "qdrant on disk (/tmp/qdrant)", "qdrant in process (:memory:), collection mem0",
                    "one store per user, nothing left on disk; the same engine"),
            CardRow("embedding dimensions", "1536 (its OpenAI embedder's)", "the configured embedder's (384 bundled)",
                    "the vector store is sized for memaudit's embedder"),
            CardRow("history store", "~/.mem0/history.db", ":memory:", "one per user, nothing left in the home folder"),
            CardRow("search top_k", "20", "k (the assistant's --k; the retrieve pass's k)", "the audit reads k items",
                    keyword_default(Memory.search, "top_k")),
            CardRow("search threshold", "0.1", "0.1 (the library's)", "as shipped", keyword_default(Memory.search,
                                                                                                  "threshold")),
            CardRow("ingest", "the caller's messages", "each user message (rollout --ingest user; exchange: with the "
                    "reply before it)", "the published study gave it the user's messages only"),
            *installed_features(),
        ]

    @staticmethod
    def fake_json(body: dict) -> dict | None:
        """The contract fake's extraction (a `json_object` call; its prompt gives the format): one
        memory, the new message's words (its optional `linked_memory_ids` left out)."""
        prompt = str(body["messages"][-1].get("content"))
        if NEW_MESSAGES not in prompt:
            return None
        new = prompt.split(NEW_MESSAGES, 1)[1].split("\n\n", 1)[0]
        return {"memory": [{"id": "0", "text": new.removeprefix("user: "), "attributed_to": "user"}]}

    # -- write path ----------------------------------------------------------------------------
    async def add(self, event) -> None:
        library = await self.opened()
        with dropped_answers() as dropped:
            await self._call(library.add, self.said(event), user_id=USER)
        count_problems(self, dropped)

    # -- read paths ----------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        library = await self.opened()
        found = await self._call(library.search, query, top_k=k, filters={"user_id": USER})
        items = []
        for result in (found or {}).get("results", []):
            item = shaped(result)
            native = {name: value for name, value in item.items() if name not in ("id", "content")}
            items.append(MemoryItem(item["id"], item["content"], result.get("score"), native))
        return items

    def dump(self) -> list[dict]:
        if self.instance is None:
            return []
        listed = self.instance.get_all(filters={"user_id": USER}, top_k=100_000)
        return deep_copy([shaped(r) for r in listed.get("results", [])])

    # -- state ---------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        state = {**self.state_header(), **self.clock.to_state(), "memories": [], "entities": [], "messages": []}
        if self.instance is not None:
            state["memories"] = points(self.instance.vector_store)
            state["entities"] = points(self.instance.entity_store)
            rows = self.instance.db.connection.execute(
                "SELECT id, session_scope, role, content, name, created_at FROM messages ORDER BY created_at, id")  # upstream schema
            state["messages"] = [list(row) for row in rows.fetchall()]
        return deep_copy(state)

    async def restore(self, state: dict) -> None:
        state = deep_copy(state)
        self.load_header(state)
        self.clock.load_state(state)
        library = await self.opened()
        for store, saved in ((library.vector_store, state["memories"]), (library.entity_store, state["entities"])):
            await self._put_points(store, saved)
        with library.db._lock:
            library.db.connection.executemany(
                "INSERT INTO messages (id, session_scope, role, content, name, created_at) VALUES (?, ?, ?, ?, ?, ?)",  # upstream schema
                [tuple(row) for row in state["messages"]])
            library.db.connection.commit()

    async def load_items(self, items: list[dict]) -> None:
        """A dumped store (published `memories.json` or our export), stored as the library stores
        a memory: same ids where they are UUIDs, same text and times; no model calls."""
        library = await self.opened()
        saved = []
        for n, item in enumerate(items, 1):
            if not isinstance(item, dict) or not isinstance(item.get("content"), str):
                raise BadInput(f"memory {n} needs a string 'content'", field="content")
            try:
                point_id = str(uuid.UUID(str(item.get("id"))))
            except ValueError:
                point_id = str(uuid.UUID(bytes=hashlib.sha256(f"{n}\x00{item['content']}".encode()).digest()[:16]))
            text = item["content"]
            saved.append({"id": point_id, "payload": {
                **(item.get("metadata") or {}), "user_id": USER, "data": text, "text_lemmatized": text,
                "hash": hashlib.md5(text.encode()).hexdigest(), "created_at": item.get("timestamp"),
                "updated_at": item.get("timestamp")}})
        await self._put_points(library.vector_store, saved)

    async def _put_points(self, store, saved: list[dict]) -> None:
        from qdrant_client.models import PointStruct
        if not saved:
            return
        vectors = await self.embedder.embed([p["payload"]["data"] for p in saved])
        store.client.upsert(collection_name=store.collection_name, points=[
            PointStruct(id=p["id"], vector=v.tolist(), payload=p["payload"]) for p, v in zip(saved, vectors)])


def installed_features() -> list[CardRow]:
    """mem0's hybrid keyword scoring and its entity boost are on only where the pieces they need are
    installed (neither can be fetched at run time here): on by themselves there, else off, said."""
    bm25 = importlib.util.find_spec("fastembed") is not None
    spacy = all(importlib.util.find_spec(name) is not None for name in ("spacy", "en_core_web_sm"))
    return [
        CardRow("hybrid search (BM25 keyword scoring)", "on where fastembed is installed",
                "on" if bm25 else OFF, "needs fastembed and its Qdrant/bm25 model, which cannot be fetched offline; "
                "without it mem0 ranks by semantic similarity only" if not bm25 else "fastembed is installed"),
        CardRow("entity boost and lemmatized keywords (spaCy)", "on where spaCy and en_core_web_sm are installed",
                "on" if spacy else OFF, "needs spaCy's en_core_web_sm model, which cannot be fetched offline; without "
                "it mem0 links no entities to boost" if not spacy else "spaCy and its model are installed"),
    ]


def points(store) -> list[dict]:
    """Every stored point of a Qdrant collection (id and payload), in id order."""
    found, offset = [], None
    while True:
        batch, offset = store.client.scroll(collection_name=store.collection_name, limit=1000, offset=offset,
                                            with_payload=True, with_vectors=False)
        found += [{"id": str(p.id), "payload": p.payload} for p in batch]
        if offset is None:
            return found


watch_dropped_answers(DROPS_LOGGER, Mem0AI.ROLE, DROPPED)
