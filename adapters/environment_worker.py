"""The worker process of a deployed library in an environment of its own (adapters/environment.py
starts it): one library instance, one user's, driven over stdin/stdout by the adapter's parent half.
It runs in the library's environment on the parent's own memaudit source (loaded by path), so an
adapter's module is imported on both sides; its worker half is a `LibraryWorker` subclass:

    class SomeWorker(LibraryWorker):
        PATCHED = "somelib"                  # the package whose uuid4()/now() the logical clock answers
        async def open(self):                # import and configure the library (self.setup, self.folder)
            import somelib
            self.memory = somelib.Memory(base_url=self.setup["base_url"], path=self.folder)
            return somelib.__version__
        async def add(self, text): ...       # every other public coroutine method is an op
        async def search(self, query, k): ...

Protocol: one JSON object a line. The first line on stdin is the set-up,
`{"worker": "module:Class", "setup": {...}, "folder": path}`, answered `{"ok": true, "result":
{"version"}}`; then each request `{"op", "args", "clock"}` gets one answer `{"ok": true, "result"}`
or `{"ok": false, "error": "Type: message"}`, both with `"clock"`: the logical clock's state after
the op. The request's `clock` is the state the op starts from (adapters/library_clock.py), so ids
and times follow the parent's record whatever ran in this process before; the time readings
restart at the op's moment (a library's background tasks read the time a varying number of times).
Whatever the library prints goes to stderr (the parent keeps it in a log file).

The worker ends on EOF on stdin, also in the middle of an op, and on Linux when its parent dies
(PR_SET_PDEATHSIG): a killed memaudit leaves no worker behind."""
from __future__ import annotations

import asyncio
import ctypes
import importlib
import inspect
import json
import os
import signal
import sys
import threading
from typing import ClassVar

from memaudit.adapters.library_clock import LibraryClock, patch_modules

PR_SET_PDEATHSIG = 1  # linux/prctl.h
SERVING = False  # True in a worker process: its adapters do not look for an environment of their own


class LibraryWorker:
    """The worker half of an adapter: the library, in its own environment."""
    PATCHED: ClassVar[str]  # the library's top-level package (its modules' uuid4/datetime are patched)

    def __init__(self, setup: dict, folder: str):
        self.setup, self.folder = setup, folder

    async def open(self) -> str:
        """Import and configure the library; its version."""
        raise NotImplementedError

    def ops(self) -> set[str]:
        return {name for name, member in inspect.getmembers(type(self), inspect.iscoroutinefunction)
                if not name.startswith("_") and name != "open"}


def die_with_parent(parent: int) -> None:
    """Be killed when the parent dies (Linux). Armed after the fork: if the parent is already
    gone, this process has been handed to another one, and it ends at once."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)


def read_requests(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue) -> None:
    """stdin, line by line, into the queue; at EOF (the parent closed the pipe or died) the
    process ends, whatever op is running."""
    for line in sys.stdin:
        loop.call_soon_threadsafe(queue.put_nowait, line)
    os._exit(0)


class Served:
    def __init__(self, worker: LibraryWorker, clock: LibraryClock):
        self.worker, self.clock, self.ops = worker, clock, worker.ops()

    async def handle(self, request: dict) -> dict:
        try:
            op = request["op"]
            if op not in self.ops:
                raise ValueError(f"unknown op {op!r} (the worker serves {', '.join(sorted(self.ops))})")
            self.clock.load_state(request["clock"])
            self.clock.ticks = 0
            with self.clock.running():
                result = await getattr(self.worker, op)(**request.get("args", {}))
            return {"ok": True, "result": jsonable(result), "clock": self.clock.to_state()}
        except Exception as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "clock": self.clock.to_state()}


def jsonable(value):
    """What an op returns, as JSON (a library's dates and ids as text)."""
    return json.loads(json.dumps(value, default=str))


def worker_class(target: str) -> type[LibraryWorker]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


async def serve(protocol) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    threading.Thread(target=read_requests, args=(loop, queue), daemon=True).start()
    first = json.loads(await queue.get())
    os.environ.update(first["setup"].get("telemetry", {}))  # libraries read the switch when imported
    try:
        worker = worker_class(first["worker"])(first["setup"], first["folder"])
        version = await worker.open()
        patch_modules(worker.PATCHED)
        answer(protocol, {"ok": True, "result": {"version": version}})
    except Exception as exc:
        answer(protocol, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    served = Served(worker, LibraryClock(first["setup"]["scope"]))
    while True:
        answer(protocol, await served.handle(json.loads(await queue.get())))


def answer(protocol, message: dict) -> None:
    protocol.write(json.dumps(message) + "\n")
    protocol.flush()


def main(parent: int) -> None:
    global SERVING
    SERVING = True
    die_with_parent(parent)
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever the library prints goes to stderr, never into the protocol
    asyncio.run(serve(protocol))
