"""`agno`: Agno's memory (agno==3.1.10, `pip install 'memaudit-bench[agno]'`), its `MemoryManager`
on its `SqliteDb`, audited as it ships.

- `MemoryManager` with its defaults (its own system prompt and capture instructions; its tools
  `add_memory`, `update_memory`, `delete_memory`, which write to the database themselves), one
  SQLite file per user in the adapter's data folder; telemetry off.
- Its model is `OpenAILike` (Agno's class for OpenAI-compatible servers) at memaudit's recording
  proxy: every call goes through memaudit's client under `memory:agno`, cached, counted,
  replayable; its tool calls are forwarded or emulated as the `memory` role's dialect says.
- Its tool loop has no step limit (agno-agi/agno#2243, #8304, #10041: a model that keeps calling
  tools keeps it running): here a write that asks the model more than `MAX_MODEL_CALLS` times is
  stopped there and counted as a write failure (what its tools stored until then stays).
- Deterministic: the ids it draws (`uuid4`) and the times it stamps (`datetime.now`, `time.time`)
  come from the episode's logical clock.

What it is given follows the published study: each message from the user (the task text and each
reply), as `create_user_memories(message=…)`. `search` is its agentic search (the model picks the
memories related to the query from all of them; no score), the query-dependent search it ships;
`dump` is the user's memories in the database's order. A failure its tools swallow (a database
error answered to the model as text) is a counted write failure."""
from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import time
import uuid
import weakref
from contextvars import ContextVar
from datetime import datetime, timezone

import anyio

from memaudit.adapters.card import CardRow
from memaudit.adapters.deployed import DeployedLibrary, RefilledStore, upstream_imports
from memaudit.adapters.library_clock import logical_utc_now, patch_modules, stdlib_uuid4
from memaudit.adapters.upstream import count_problems
from memaudit.errors import BadInput, InvalidOutput
from memaudit.types import MemoryItem

USER = "user"
KIND = "memory"
TOOLS = {"add_memory", "update_memory", "delete_memory"}  # the manager's tools (its `clear_memory` is off)
TELEMETRY = {"AGNO_TELEMETRY": "false"}
# The bound of one write's tool loop, which Agno does not have: a write is one call that answers
# with tool calls and one that ends, two or three when the model also updates; ten is ample.
MAX_MODEL_CALLS = 10
# Agno reports a failure its tools swallowed (and any other) on this logger, and goes on.
LOGGER = "agno"

_write: ContextVar["WriteBudget | None"] = ContextVar("memaudit_agno_write", default=None)


class WriteBudget:
    """One write's model calls, and the problems Agno logged during it."""

    def __init__(self):
        self.calls = 0
        self.problems: list[Exception] = []

    def spend(self) -> None:
        self.calls += 1
        if self.calls > MAX_MODEL_CALLS:
            raise InvalidOutput(AgnoMemory.ROLE, "", f"Agno's tool loop asked the model {MAX_MODEL_CALLS} times "
                                                     "without ending (it has no step limit: agno-agi/agno#2243)")


class LoggedProblems(logging.Handler):
    """Agno's warnings and errors, kept for the write that is running instead of printed."""

    def emit(self, record: logging.LogRecord) -> None:
        budget = _write.get()
        if budget is not None and record.levelno >= logging.WARNING:
            budget.problems.append(InvalidOutput(AgnoMemory.ROLE, "", f"Agno reported: {record.getMessage()[:300]}"))


class LogicalTime:
    """The `time` module with `time()` answering from the running clock (Agno's database stamps
    updates with `time.time()`)."""

    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def time() -> float:
        return logical_utc_now().timestamp()


with upstream_imports("agno", telemetry=TELEMETRY):
    import agno.db.sqlite.sqlite
    from agno.db.schemas.memory import UserMemory
    from agno.db.sqlite import SqliteDb
    from agno.memory import MemoryManager
    from agno.models.openai.like import OpenAILike

_logger = logging.getLogger(LOGGER)
_logger.handlers = [LoggedProblems()]  # counted, not printed: a command's output stays one line a fact
_logger.propagate = False
patch_modules("agno")
agno.db.sqlite.sqlite.time = LogicalTime()
# Its tools import uuid4 when they run (`from uuid import uuid4` inside each tool), which no module
# attribute can answer: the uuid module's own, which answers from agno's clocks only (another
# library's clock never sees it) and otherwise is the original.
uuid.uuid4 = stdlib_uuid4


class BoundedModel(OpenAILike):
    """`OpenAILike` whose requests within one write are counted against its budget."""

    async def ainvoke(self, *args, **kwargs):
        budget = _write.get()
        if budget is not None:
            budget.spend()
        return await super().ainvoke(*args, **kwargs)


class AgnoMemory(RefilledStore, DeployedLibrary):
    name = "agno"
    library = "agno"
    TELEMETRY = TELEMETRY
    TOOL_CALLING = True
    # measured on the contract's fake: two manager calls a message (one answered with a tool call,
    # one after its result), and the endpoint's tool check once a command
    CALLS_PER_MESSAGE = 2.0
    scored = False  # its model picks the memories: they come in its order, without a score

    def __init__(self, ctx):
        super().__init__(ctx)
        self.clock.draws_stdlib_uuid4 = True  # its tools' `from uuid import uuid4` (above)
        self.threads = None  # the worker-thread limiter of its search (a synchronous call)

    # -- the library ---------------------------------------------------------------------------
    async def open(self, endpoint):
        folder = tempfile.mkdtemp(prefix="memaudit-agno-")
        weakref.finalize(self, shutil.rmtree, folder, True)
        model = BoundedModel(id=endpoint.model, base_url=endpoint.base_url, api_key=endpoint.key,
                             timeout=endpoint.timeout, max_retries=endpoint.max_retries)
        self.threads = anyio.CapacityLimiter(1)
        return MemoryManager(model=model, db=SqliteDb(db_file=os.path.join(folder, "memory.db")))

    # -- write path ----------------------------------------------------------------------------
    async def add(self, event) -> None:
        manager = await self.opened()
        budget = WriteBudget()
        token = _write.set(budget)
        try:
            done = await self.guarded(lambda: manager.acreate_user_memories(message=event.text, user_id=USER))
        finally:
            _write.reset(token)
        if done is not None:  # a failed write is counted once, whatever Agno logged about it
            count_problems(self, budget.problems)
        self.stored = self._read()

    # -- read paths ----------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        manager = await self.opened()
        if not self.stored:  # Agno answers an empty store without a model call
            return []

        def agentic():  # synchronous: in a worker thread, which runs in this context (the clock's)
            return manager.search_user_memories(query=query, limit=k, retrieval_method="agentic", user_id=USER)

        found = await self.guarded(lambda: anyio.to_thread.run_sync(agentic, limiter=self.threads))
        items = []
        for memory in found or []:
            item = memory_item(memory)
            items.append(MemoryItem(item.pop("id"), item.pop("content"), None, item))
        return items[:k]

    def _read(self) -> list[dict]:
        """The user's memories in the database's order (its insertion order)."""
        return [memory_item(m) for m in self.instance.get_user_memories(user_id=USER) or []]

    # -- state (snapshot and restore: deployed.RefilledStore) ---------------------------------
    async def load_items(self, items: list[dict]) -> None:
        """A dumped store (ours, or any items with `content`), each a memory of the user; items
        without ids or times get ones from the content and the logical date of task 1."""
        stored = []
        for n, item in enumerate(items, 1):
            if not isinstance(item, dict) or not isinstance(item.get("content"), str):
                raise BadInput(f"memory {n} needs a string 'content'", field="content")
            stored.append({"id": str(item.get("id") or self.new_id(item["content"])), "content": item["content"],
                           "topics": item.get("topics"), "input": item.get("input"),
                           "created_at": item.get("created_at") or moment(self.clock.now(timezone.utc).timestamp()),
                           "updated_at": item.get("updated_at")})
        await self._refill(stored)

    async def _refill(self, stored: list[dict]) -> None:
        """The database filled with dumped memories by its own bulk upsert, in the dumped order,
        with their recorded times."""
        manager = await self.opened()
        if stored:
            manager.db.upsert_memories([UserMemory(
                memory=item["content"], memory_id=item["id"], topics=item.get("topics"), user_id=USER,
                input=item.get("input"), created_at=epoch(item["created_at"]),
                updated_at=epoch(item.get("updated_at") or item["created_at"])) for item in stored],
                preserve_updated_at=True)
        self.stored = self._read()

    # -- configuration card --------------------------------------------------------------------
    @classmethod
    def card_rows(cls) -> list[CardRow]:
        return [
            CardRow("model class", "OpenAIChat(id='gpt-4o')", "OpenAILike",
                    "Agno's class for OpenAI-compatible servers (system messages as `system`, not `developer`)"),
            CardRow("db", "none (nothing is stored)", "SqliteDb, one file per user",
                    "its embedded database, as its documentation configures memory"),
            CardRow("search retrieval_method", "last_n", "agentic",
                    "the query-dependent search it ships (the model picks the related memories)"),
            CardRow("tool loop bound", "none (agno-agi/agno#2243, #8304, #10041)",
                    f"{MAX_MODEL_CALLS} model calls per write", "a write past it is stopped and counted"),
        ]

    # -- the contract's fake model (a test double: memaudit/testing/adapter_contract.py) ----------
    @staticmethod
    def fake_tool_calls(request, messages: list[dict]) -> list[tuple[str, dict]] | None:
        """As a model follows the manager's prompt: one new memory, a third-person line from the
        user's message; once its tools have answered, a word that it is done (the loop ends)."""
        if not TOOLS <= {tool["function"]["name"] for tool in request.tools}:
            return None  # not the manager's request
        if any(message.get("role") == "assistant" for message in messages):
            return []  # its calls were made (their results follow, as tool or, emulated, user messages)
        said = next(str(m.get("content")) for m in messages if m.get("role") == "user").strip()
        return [("add_memory", {"memory": f"The user said: {said}", "topics": [topic_of(said)]})]

    @staticmethod
    def fake_answer(body: dict) -> object | None:
        """Its agentic search: the listed memories that share a word with the query."""
        if "memory_ids" not in str(body.get("response_format")):
            return None
        listed, query = body["messages"][0]["content"], words(body["messages"][-1]["content"].rsplit(":", 1)[-1])
        found = re.findall(r"^ID: (\S+)\nMemory: (.*)$", listed, re.M)
        return {"memory_ids": [memory_id for memory_id, text in found if words(text) & query]}


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3}


def topic_of(said: str) -> str:
    return max(re.findall(r"[A-Za-z]+", said) or ["general"], key=len).lower()


def moment(seconds) -> str | None:
    """Agno's epoch seconds as an ISO time in UTC."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat() if seconds is not None else None


def epoch(when) -> int:
    return int(datetime.fromisoformat(when).timestamp()) if isinstance(when, str) else int(when)


def memory_item(memory) -> dict:
    """One of Agno's `UserMemory`s in the dump's shape."""
    return {"id": memory.memory_id, "content": memory.memory, "kind": KIND, "topics": memory.topics,
            "input": memory.input, "created_at": moment(memory.created_at), "updated_at": moment(memory.updated_at)}
