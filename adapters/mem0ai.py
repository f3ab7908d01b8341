"""`mem0ai`: the upstream Mem0 library (`pip install 'memaudit-bench[mem0ai]'`, mem0ai==2.2.1),
audited as it ships, with its own prompts and pipeline.

- Its LLM is pointed at memaudit's recording proxy (`memaudit/llm/proxy.py`), so every call it
  makes goes through memaudit's client under the role `memory:mem0ai`: cached, counted, replayable.
  Its extraction answers are held to the library's own output format (a JSON schema given to the
  proxy), so an invalid answer is repaired or counted like every memory-side call.
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
import logging
import os
import tempfile
import uuid
import warnings

import anyio

from memaudit.adapters.deployed import DeployedLibrary, quiet_loggers, upstream_imports
from memaudit.adapters.indexed import deep_copy
from memaudit.adapters.library_clock import patch_modules
from memaudit.errors import BadInput
from memaudit.roles import NONEMPTY, STR, obj
from memaudit.types import MemoryItem

USER = "user"
# The published integration's settings for the library's own LLM.
LLM_TEMPERATURE = 0.0
LLM_MAX_TOKENS = 2000
# The library's extraction output (its prompt's "OUTPUT FORMAT"), as a schema for the proxy.
EXTRACTION_SCHEMA = obj(memory={"type": "array", "items": obj(
    id=STR, text=NONEMPTY, attributed_to={"type": "string", "enum": ["user", "assistant"]},
    linked_memory_ids={"type": "array", "items": STR})})
TELEMETRY = {"MEM0_TELEMETRY": "False"}

# Its notices about optional extras (spaCy, fastembed) and local Qdrant, and its folder (which it
# makes when imported) out of the user's home.
quiet_loggers({"mem0": logging.ERROR})
warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
os.environ.setdefault("MEM0_DIR", os.path.join(tempfile.gettempdir(), "memaudit-mem0"))
with upstream_imports("mem0ai", telemetry=TELEMETRY):
    import mem0.configs.prompts
    import mem0.memory.main
    import mem0.memory.storage
    from mem0 import Memory
for _module in (mem0.memory.main, mem0.memory.storage, mem0.configs.prompts):  # the ones that draw ids and times
    patch_modules(_module.__name__)


class Mem0AI(DeployedLibrary):
    name = "mem0ai"
    library = "mem0ai"
    TELEMETRY = TELEMETRY
    ROUTE_SCHEMA = EXTRACTION_SCHEMA
    CALLS_PER_MESSAGE = 1.0  # its extraction, measured on the contract's fake: 7 calls for its 7 user messages

    def __init__(self, ctx):
        super().__init__(ctx)
        self.threads = None  # the worker-thread limiter of this adapter's library calls

    # -- the library ---------------------------------------------------------------------------
    async def open(self, endpoint):
        from qdrant_client import QdrantClient
        config = {
            "llm": {"provider": "openai", "config": {
                "model": endpoint.model, "temperature": LLM_TEMPERATURE, "max_tokens": LLM_MAX_TOKENS,
                "api_key": endpoint.key, "openai_base_url": endpoint.base_url}},
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

    @staticmethod
    def fake_answer(body: dict) -> dict:
        """The contract fake's extraction: one memory, the new message's words."""
        new = body["messages"][-1]["content"].split("## New Messages\n", 1)[1].split("\n\n", 1)[0]
        return {"memory": [{"id": "0", "text": new.removeprefix("user: "), "attributed_to": "user",
                            "linked_memory_ids": []}]}

    # -- write path ----------------------------------------------------------------------------
    async def add(self, event) -> None:
        library = await self.opened()
        await self._call(library.add, [{"role": "user", "content": event.text}], user_id=USER)

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
                "SELECT id, session_scope, role, content, name, created_at FROM messages ORDER BY created_at, id")
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
                "INSERT INTO messages (id, session_scope, role, content, name, created_at) VALUES (?, ?, ?, ?, ?, ?)",
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


def points(store) -> list[dict]:
    """Every stored point of a Qdrant collection (id and payload), in id order."""
    found, offset = [], None
    while True:
        batch, offset = store.client.scroll(collection_name=store.collection_name, limit=1000, offset=offset,
                                            with_payload=True, with_vectors=False)
        found += [{"id": str(p.id), "payload": p.payload} for p in batch]
        if offset is None:
            return found


def shaped(result: dict) -> dict:
    """A library result as the published dump wrote it."""
    metadata = result.get("metadata")
    return {"id": result.get("id"), "content": result.get("memory") or "",
            "category": metadata.get("category", "fact") if isinstance(metadata, dict) else "fact",
            "metadata": metadata, "timestamp": result.get("created_at") or result.get("updated_at")}

