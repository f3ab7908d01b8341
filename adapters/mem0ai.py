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

import hashlib
import logging
import os
import tempfile
import uuid
import warnings
from contextvars import ContextVar
from datetime import datetime, timedelta, timezone

import anyio

from memaudit.adapters.base import Event, MemoryAdapter
from memaudit.adapters.indexed import deep_copy
from memaudit.adapters.memory_calls import MODEL_FAILURES
from memaudit.errors import BadInput, MemauditError
from memaudit.adapters.upstream import (PROXY_KEY, dropped_answers, embedding_dimensions, library_route,
                                        watch_dropped_answers)
from memaudit.types import MemoryItem

ROLE = "memory:mem0ai"
USER = "user"
EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)  # the logical date of task 1
SOURCE = ("task_start", "user")
# The library logs an extraction answer its parser cannot read here, and keeps nothing.
DROPS_LOGGER, DROPPED = "mem0.memory.main", "Error parsing extraction response"

_logical: ContextVar["LogicalClock | None"] = ContextVar("memaudit_mem0ai_clock", default=None)


class LogicalClock:
    """Answers the library's `uuid4()` and `datetime.now()` while one adapter call runs."""

    def __init__(self, adapter: "Mem0AI", clock: str, task_index: int, turn: int):
        self.adapter, self.clock = adapter, clock
        self.base = EPOCH + timedelta(days=task_index - 1, minutes=turn)

    def now(self, tz=None) -> datetime:
        self.adapter.ticks += 1  # strictly increasing, so the library's time ordering is kept
        moment = self.base + timedelta(microseconds=self.adapter.ticks)
        return moment if tz is not None else moment.replace(tzinfo=None)

    def uuid4(self) -> uuid.UUID:
        self.adapter.uuids += 1
        digest = hashlib.sha256(f"{self.adapter.ctx.scope}\x00uuid\x00{self.adapter.uuids}".encode()).digest()
        return uuid.UUID(bytes=digest[:16], version=4)


class _Datetime(datetime):
    @classmethod
    def now(cls, tz=None):
        clock = _logical.get()
        return clock.now(tz) if clock is not None else datetime.now(tz)


class _Uuid:
    def __getattr__(self, name):
        return getattr(uuid, name)

    @staticmethod
    def uuid4():
        clock = _logical.get()
        return clock.uuid4() if clock is not None else uuid.uuid4()


def _import_library():
    os.environ["MEM0_TELEMETRY"] = "False"
    # Its notices about optional extras (spaCy, fastembed) and local Qdrant would break the
    # one-line output of every command; a failure still reaches the adapter as an exception.
    logging.getLogger("mem0").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
    os.environ.setdefault("MEM0_DIR", os.path.join(tempfile.gettempdir(), "memaudit-mem0"))
    try:
        import mem0.configs.prompts
        import mem0.memory.main
        import mem0.memory.storage
        from mem0 import Memory
    except ImportError as exc:
        raise BadInput(f"the mem0ai system needs the upstream library ({exc}): "
                       "pip install 'memaudit-bench[mem0ai]'", field="systems") from None
    watch_dropped_answers(DROPS_LOGGER, ROLE, DROPPED)
    for module in (mem0.memory.main, mem0.memory.storage, mem0.configs.prompts):
        if hasattr(module, "datetime"):
            module.datetime = _Datetime
        if hasattr(module, "uuid"):
            module.uuid = _Uuid()
    return Memory


# Imported with the adapter, so that a missing extra fails before a run is opened.
Memory = _import_library()


class Mem0AI(MemoryAdapter):
    name = "mem0ai"
    library = "mem0ai"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.library = None
        self.route = None
        self.threads = None  # the worker-thread limiter of this adapter's library calls
        self.ticks = 0   # logical-clock readings so far
        self.uuids = 0   # ids the library has drawn so far
        self.last = ("task000.turn00", 1, 0)  # the clock of the latest write, for reads

    # -- the library ---------------------------------------------------------------------------
    async def _open(self):
        if self.library is None:
            from qdrant_client import QdrantClient
            self.route = await library_route(self, ROLE)
            dims = await embedding_dimensions(self)
            config = {
                "llm": {"provider": "openai", "config": {
                    "model": self.ctx.llm.settings.role(ROLE).model, "api_key": PROXY_KEY,
                    "openai_base_url": self.route.base_url}},
                "embedder": {"provider": "openai", "config": {
                    "model": self.embedder.model_name, "api_key": PROXY_KEY,
                    "openai_base_url": self.route.base_url}},
                "vector_store": {"provider": "qdrant", "config": {
                    "collection_name": "mem0", "embedding_model_dims": dims,
                    "client": QdrantClient(location=":memory:")}},
                "history_db_path": ":memory:",
            }
            # The library's threads wait on the proxy, whose embeddings need a worker thread of the
            # default pool: with their own limiter, many users' library calls cannot starve it.
            self.threads = anyio.CapacityLimiter(1)
            self.library = await anyio.to_thread.run_sync(Memory.from_config, config, limiter=self.threads)
        return self.library

    async def _call(self, clock: tuple[str, int, int], fn, *args, **kwargs):
        """Run a library call in a worker thread, on the logical clock, its model calls counted
        with the caller's artifact. A model failure is counted and gives None; a cache miss under
        `--cache replay` propagates."""
        await self._open()
        logical = LogicalClock(self, *clock)

        def run():
            token = _logical.set(logical)
            try:
                return fn(*args, **kwargs)
            finally:
                _logical.reset(token)

        with self.route.calls_from_here():
            try:
                return await anyio.to_thread.run_sync(run, limiter=self.threads)
            except Exception as exc:
                cause = self.route.error or exc
                if isinstance(cause, MemauditError) and not isinstance(cause, MODEL_FAILURES):
                    raise cause from None  # a cache miss under --cache replay, an EndpointError
                self.failures.record(ROLE, logical.clock, cause)
                return None

    # -- write path ----------------------------------------------------------------------------
    async def observe(self, event: Event) -> None:
        if event.kind not in SOURCE:
            return
        self.last = (event.clock, event.task_index, event.turn)
        library = await self._open()
        with dropped_answers() as dropped:
            await self._call(self.last, library.add, [{"role": "user", "content": event.text}], user_id=USER)
        for problem in dropped:
            self.failures.record(ROLE, event.clock, problem)

    # -- read paths ----------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        library = await self._open()
        found = await self._call(self.last, library.search, query, top_k=k, filters={"user_id": USER})
        items = []
        for result in (found or {}).get("results", []):
            item = shaped(result)
            native = {name: value for name, value in item.items() if name not in ("id", "content")}
            items.append(MemoryItem(item["id"], item["content"], result.get("score"), native))
        return items

    def dump(self) -> list[dict]:
        if self.library is None:
            return []
        listed = self.library.get_all(filters={"user_id": USER}, top_k=100_000)
        return deep_copy([shaped(r) for r in listed.get("results", [])])

    # -- state ---------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        state = {**self.state_header(), "ticks": self.ticks, "uuids": self.uuids, "last": list(self.last),
                 "memories": [], "entities": [], "messages": []}
        if self.library is not None:
            state["memories"] = points(self.library.vector_store)
            state["entities"] = points(self.library.entity_store)
            rows = self.library.db.connection.execute(
                "SELECT id, session_scope, role, content, name, created_at FROM messages ORDER BY created_at, id")
            state["messages"] = [list(row) for row in rows.fetchall()]
        return deep_copy(state)

    async def restore(self, state: dict) -> None:
        state = deep_copy(state)
        self.load_header(state)
        self.ticks, self.uuids, self.last = state["ticks"], state["uuids"], tuple(state["last"])
        library = await self._open()
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
        library = await self._open()
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
