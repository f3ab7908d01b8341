"""The adapter boundary. memaudit calls a memory system only through `Checked`, which checks what
every method hands back (a search returning a `str`, an item whose content is an `int`, an
`observe` written without `async`) and turns an exception raised inside the adapter into one line
naming the system, the method and what went wrong; the traceback goes to a log file that the line
names. memaudit's own errors (a model failure, a cache miss, a bad option) pass through unchanged.
A rollout also times each write (`observe`) and read (`context`) here (`Checked.ops`).

The same checks are what `memaudit check-adapter` runs (memaudit/testing/adapter_contract.py)."""
from __future__ import annotations

import inspect
import math
import time
import traceback
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import orjson

from memaudit.adapters.base import AdapterContext, AgentContext, MemoryAdapter
from memaudit.adapters.registry import get_adapter
from memaudit.errors import MemauditError
from memaudit.llm.client import collected_uses
from memaudit.types import KIND, MemoryItem, MemoryOp

ADAPTER_LOG = "memaudit-adapter.log"


class AdapterFault(MemauditError):
    """A memory system broke its contract or raised: one line naming system, method and problem."""


def open_adapter(system: str, ctx: AdapterContext, log_dir: Path) -> "Checked":
    """A fresh `system` adapter behind the boundary checks; tracebacks go to log_dir/ADAPTER_LOG."""
    cls = get_adapter(system)
    boundary = Boundary(system, Path(log_dir) / ADAPTER_LOG)
    return Checked(boundary.sync("__init__", cls, ctx), boundary)


class Boundary:
    """Calls into one system's code, checked; a fault names the system and method."""

    def __init__(self, system: str, log: Path):
        self.system, self.log = system, log

    def fault(self, method: str, problem: str) -> AdapterFault:
        return AdapterFault(f"memory system {self.system!r}: {method}() {problem}")

    def raised(self, method: str, exc: Exception) -> AdapterFault:
        where = self._log_traceback(method, exc)
        return self.fault(method, f"raised {type(exc).__name__}: {exc}{where}")

    def sync(self, method: str, fn, *args):
        try:
            result = fn(*args)
        except MemauditError:
            raise
        except Exception as exc:
            raise self.raised(method, exc) from None
        if inspect.isawaitable(result):
            _close(result)
            raise self.fault(method, "must be a plain method, not `async def` (it returned a coroutine)")
        return result

    async def call(self, method: str, fn, *args):
        try:
            pending = fn(*args)
            if not inspect.isawaitable(pending):
                raise self.fault(method, f"must be `async def` (it returned {_kind(pending)} without awaiting)")
            return await pending
        except MemauditError:
            raise
        except Exception as exc:
            raise self.raised(method, exc) from None

    def _log_traceback(self, method: str, exc: Exception) -> str:
        try:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(f"--- memory system {self.system!r}, {method}()\n")
                f.write("".join(traceback.format_exception(exc)))
        except OSError:
            return ""
        return f" (traceback in {self.log})"


class Checked:
    """An adapter behind the boundary: the protocol's methods checked, everything else forwarded."""

    def __init__(self, adapter: MemoryAdapter, boundary: Boundary):
        self.adapter, self.boundary = adapter, boundary
        # Set to a list by a rollout: each write and read is timed into it (its wall time, and the
        # model calls it made, as the calls collected around it say).
        self.ops: list[MemoryOp] | None = None
        self.started = False  # an operation was timed: the next ones paid no start-up
        self.alone = False  # set by a rollout that runs no other system or user meanwhile

    def __getattr__(self, name: str):  # name, supports_retrieve, prompts, write_failures …
        return getattr(self.adapter, name)

    @asynccontextmanager
    async def _timed(self, op: str):
        if self.ops is None:
            yield
            return
        uses = collected_uses()
        before = len(uses) if uses is not None else 0
        start = time.perf_counter()
        yield
        seconds = time.perf_counter() - start
        made = uses[before:] if uses is not None else []
        self.ops.append(MemoryOp(op, seconds, len(made), sum(1 for _, _, cached in made if cached),
                                 startup=not self.started, alone=self.alone))
        self.started = True

    async def observe(self, event) -> None:
        async with self._timed(event.kind):
            await self.boundary.call("observe", self.adapter.observe, event)

    async def search(self, query: str, k: int) -> list[MemoryItem]:
        found = await self.boundary.call("search", self.adapter.search, query, k)
        problem = _items_problem(found, k)
        if problem:
            raise self.boundary.fault("search", problem)
        return [self._labelled_item(item) for item in found]

    def _labelled_item(self, item: MemoryItem) -> MemoryItem:
        """A search result with its `kind` (MemoryAdapter.kind_of) among its fields."""
        kind = self.boundary.sync("kind_of", self.adapter.kind_of, {"content": item.content, **item.fields})
        return item if kind is None or KIND in item.fields else replace(item, fields={**item.fields, KIND: kind})

    def _labelled(self, item: dict) -> dict:
        """A dump item with its `kind` (MemoryAdapter.kind_of)."""
        kind = self.boundary.sync("kind_of", self.adapter.kind_of, item)
        return item if kind is None or KIND in item else {**item, KIND: kind}

    async def context(self, query: str, k: int) -> AgentContext:
        async with self._timed("search"):
            found = await self.boundary.call("context", self.adapter.context, query, k)
        if not isinstance(found, AgentContext):
            raise self.boundary.fault("context", f"returned {_kind(found)}, expected an AgentContext")
        problem = _items_problem(found.notes, None)
        if problem:
            raise self.boundary.fault("context", f"notes: {problem}")
        return replace(found, notes=[self._labelled_item(item) for item in found.notes])

    def dump(self) -> list[dict]:
        items = self.boundary.sync("dump", self.adapter.dump)
        problem = _dump_problem(items)
        if problem:
            raise self.boundary.fault("dump", problem)
        return [self._labelled(item) for item in items]

    def footprint(self) -> tuple[int, float]:
        self.dump()  # what footprint counts must pass dump's checks first
        return self.boundary.sync("footprint", self.adapter.footprint)

    def snapshot(self) -> dict:
        state = self.boundary.sync("snapshot", self.adapter.snapshot)
        if not isinstance(state, dict):
            raise self.boundary.fault("snapshot", f"returned {_kind(state)}, expected a dict")
        try:
            orjson.dumps(state)
        except TypeError as exc:
            raise self.boundary.fault("snapshot", f"returned a state that is not JSON ({exc})") from None
        return state

    async def restore(self, state: dict) -> None:
        await self.boundary.call("restore", self.adapter.restore, state)

    async def load_items(self, items: list[dict]) -> None:
        await self.boundary.call("load_items", self.adapter.load_items, items)

    async def close(self) -> None:
        await self.boundary.call("close", self.adapter.close)


def _items_problem(found, k: int | None) -> str | None:
    if not isinstance(found, list):
        return f"returned {_kind(found)}, expected a list of MemoryItem"
    if k is not None and len(found) > k:
        return f"returned {len(found)} items for k={k}"
    for i, item in enumerate(found):
        if not isinstance(item, MemoryItem):
            return f"item {i} is {_kind(item)}, expected a MemoryItem"
        if not isinstance(item.content, str):
            return f"item {i}: content is {_kind(item.content)}, expected a str"
        if item.score is not None and (isinstance(item.score, bool) or not isinstance(item.score, (int, float))
                                       or math.isnan(item.score)):
            return f"item {i}: score is {item.score!r}, expected a number or None"
        if not isinstance(item.fields, dict):
            return f"item {i}: fields is {_kind(item.fields)}, expected a dict"
    return None


def _dump_problem(items) -> str | None:
    if not isinstance(items, list):
        return f"returned {_kind(items)}, expected a list of dicts"
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            return f"item {i} is {_kind(item)}, expected a dict"
        if not isinstance(item.get("content"), str):
            return f"item {i}: content is {_kind(item.get('content'))}, expected a str"
    return None


def _kind(value) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def _close(awaitable) -> None:
    """Close a coroutine that will never be awaited (no "never awaited" warning on top of the fault)."""
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
