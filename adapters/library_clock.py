"""The logical clock of a deployed library (stdlib only: the cognee worker, which runs in the
library's own environment without memaudit's dependencies, imports it too). While an adapter calls
its library, the ids and times the library draws come from the episode's logical clock:

    clock = LibraryClock(ctx.scope)
    patch_modules("graphiti_core")          # its uuid4()/datetime.now()/utc_now() answer from the clock
    clock.at(event)
    with clock.running():                   # while the library runs for this event
        ...

Outside `running`, the patched functions answer as the originals do (another user's adapter, or
code that runs between calls, sees wall time)."""
from __future__ import annotations

import hashlib
import sys
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timedelta, timezone

EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)  # the logical date of task 1
START = ("task000.turn00", 1, 0)  # the clock before the first write

_running: ContextVar["LibraryClock | None"] = ContextVar("memaudit_library_clock", default=None)
_wall_uuid4 = uuid.uuid4
_wall_now = datetime.now


class LibraryClock:
    """One adapter's logical clock: (clock, task index, turn) of the latest write, and how many
    times the library has read the time and drawn an id, so both continue after a restore."""

    def __init__(self, scope: str):
        self.scope = scope
        self.ticks = 0   # time readings so far: strictly increasing, so the library's ordering by time holds
        self.uuids = 0   # ids drawn so far
        self.last = START
        # Whether the stdlib's own `uuid.uuid4` answers from this clock while it runs (a library
        # that imports uuid4 inside its functions, where no module attribute can answer: agno). Only
        # such a library's clock: another library's clients (HTTP, vector stores) draw uuids too,
        # and would otherwise move its id counter by whether that library was imported.
        self.draws_stdlib_uuid4 = False

    def now(self, tz=None) -> datetime:
        self.ticks += 1
        _, task_index, turn = self.last
        moment = EPOCH + timedelta(days=task_index - 1, minutes=turn, microseconds=self.ticks)
        return moment.astimezone(tz) if tz is not None else moment.replace(tzinfo=None)

    def uuid4(self) -> uuid.UUID:
        self.uuids += 1
        digest = hashlib.sha256(f"{self.scope}\x00uuid\x00{self.uuids}".encode()).digest()
        return uuid.UUID(bytes=digest[:16], version=4)

    @property
    def clock(self) -> str:
        return self.last[0]

    def at(self, event) -> None:
        """Move to a write's moment (an Event)."""
        self.last = (event.clock, event.task_index, event.turn)

    @contextmanager
    def running(self):
        """The library's uuid4/now answer from this clock inside the block (and in the tasks and
        worker threads started from it that copy the context)."""
        token = _running.set(self)
        try:
            yield self
        finally:
            _running.reset(token)

    def to_state(self) -> dict:
        return {"ticks": self.ticks, "uuids": self.uuids, "last": list(self.last)}

    def load_state(self, state: dict) -> None:
        self.ticks, self.uuids, self.last = state["ticks"], state["uuids"], tuple(state["last"])


def logical_uuid4() -> uuid.UUID:
    clock = _running.get()
    return clock.uuid4() if clock is not None else _wall_uuid4()


def stdlib_uuid4() -> uuid.UUID:
    """What the stdlib's `uuid.uuid4` becomes for a library whose clock `draws_stdlib_uuid4`."""
    clock = _running.get()
    return clock.uuid4() if clock is not None and clock.draws_stdlib_uuid4 else _wall_uuid4()


def logical_utc_now() -> datetime:
    clock = _running.get()
    return clock.now(timezone.utc) if clock is not None else _wall_now(timezone.utc)


class LogicalDatetime(datetime):
    """`datetime` whose now()/utcnow() answer from the running clock."""

    @classmethod
    def now(cls, tz=None):
        clock = _running.get()
        return clock.now(tz) if clock is not None else _wall_now(tz)

    @classmethod
    def utcnow(cls):
        clock = _running.get()
        return clock.now(None) if clock is not None else _wall_now(timezone.utc).replace(tzinfo=None)


class LogicalUuidModule:
    """The `uuid` module with uuid4 answering from the running clock."""

    def __getattr__(self, name):
        return getattr(uuid, name)

    uuid4 = staticmethod(logical_uuid4)


def patch_modules(prefix: str, *, utc_now: object = None) -> None:
    """In every loaded module of a library: its `uuid` module, its imported `uuid4`, its imported
    `datetime` class and (when given) its own `utc_now` helper answer from the running clock."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name == prefix or name.startswith(prefix + ".")):
            continue
        found = vars(module)
        if found.get("uuid") is uuid:
            module.uuid = LogicalUuidModule()
        if found.get("uuid4") in (_wall_uuid4, stdlib_uuid4):  # imported before or after agno replaced it
            module.uuid4 = logical_uuid4
        if found.get("datetime") is datetime:
            module.datetime = LogicalDatetime
        if utc_now is not None and found.get("utc_now") is utc_now:
            module.utc_now = logical_utc_now
