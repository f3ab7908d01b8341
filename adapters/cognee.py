"""`cognee`: cognee 1.6.5 with its embedded defaults (SQLite, LanceDB, its Kuzu graph store),
audited as it ships, in an environment of its own.

cognee does not install beside memaudit's other libraries (pip: ResolutionImpossible;
docs/adapters.md), so each user's cognee runs in a worker process of cognee's environment
(adapters/cognee_worker.py: one JSON request a line over stdin/stdout, one data folder per worker).
`make install` builds that environment in `.venv-cognee` (scripts/library_env.sh); elsewhere
`MEMAUDIT_COGNEE_PYTHON` names a Python that has `cognee==1.6.5` (the `cognee` extra). Its model
and embedding calls go over HTTP to memaudit's recording proxy in this process, under
`memory:cognee`: cached, counted and replayable like every memaudit call.

What it is given follows the published study: each user message is added to its dataset and
cognified (chunks, an extracted knowledge graph, summaries). `search` is its chunk search (the
stored text ranked by its vector store, with its scores); `dump` is every node of its graph
(documents, chunks, entities, entity types, summaries) with their native fields. Ids and times
follow the episode's logical clock (inside the worker). The state is the messages given to it,
re-added on restore with every call answered from the cache."""
from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import tempfile
import weakref
from pathlib import Path

from memaudit.adapters.deployed import DeployedLibrary, ReplayedMessages, install_hint
from memaudit.adapters.indexed import deep_copy
from memaudit.errors import BadInput
from memaudit.types import MemoryItem

PYTHON_VARIABLE = "MEMAUDIT_COGNEE_PYTHON"
WORKER = Path(__file__).with_name("cognee_worker.py")
CHECKOUT_ENVIRONMENT = Path(__file__).resolve().parent.parent / ".venv-cognee"
PROBE = "import importlib.metadata as m; print(m.version('cognee'))"


def worker_python() -> Path:
    """The Python of cognee's environment: MEMAUDIT_COGNEE_PYTHON, else the checkout's .venv-cognee."""
    named = os.environ.get(PYTHON_VARIABLE)
    return Path(named) if named else CHECKOUT_ENVIRONMENT / "bin" / "python"


@functools.cache
def cognee_version(python: Path) -> str:
    """cognee's version in that environment; BadInput saying how to get one when it has none."""
    how = (f"the cognee system runs in its own environment: `make install` builds {CHECKOUT_ENVIRONMENT.name} "
           f"(scripts/library_env.sh), or set {PYTHON_VARIABLE} to a Python with the `cognee` extra "
           f"({install_hint('cognee')} in a separate environment)")
    try:
        found = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True, timeout=120)
    except OSError:
        raise BadInput(f"{how}; {python} does not run", field="systems") from None
    if found.returncode != 0:
        raise BadInput(f"{how}; {python} has no cognee", field="systems")
    return found.stdout.strip()


cognee_version(worker_python())  # at import, so that a missing environment fails before a run is opened


class WorkerFailed(Exception):
    """The worker answered a request with an error (cognee's exception, by type and message)."""


class CogneeMemory(ReplayedMessages, DeployedLibrary):
    name = "cognee"
    library = "cognee"
    # Set inside its worker (adapters/cognee_worker.py `configure`).
    TELEMETRY = {"TELEMETRY_DISABLED": "1"}
    # measured on the contract's fake: its graph extraction and its chunk summary a message
    # (15 calls for 7 user messages: the first write also sends a connection probe)
    CALLS_PER_MESSAGE = 2.0

    def __init__(self, ctx):
        super().__init__(ctx)
        self.worker_clock: dict | None = None  # the worker's clock state after the latest write

    @classmethod
    def library_release(cls) -> str:
        return f"cognee=={cognee_version(worker_python())}"

    async def open(self, endpoint) -> "Worker":
        worker = await Worker.start(worker_python(), {
            "base_url": endpoint.base_url, "model": endpoint.model, "embed_model": endpoint.embed_model,
            "dimensions": await self.dimensions(), "scope": self.ctx.scope,
            "tiktoken_cache": tiktoken_cache(worker_python()), "telemetry": self.TELEMETRY})
        weakref.finalize(self, worker.stop)
        return worker

    # -- write path ----------------------------------------------------------------------------
    async def add(self, event) -> None:
        worker = await self.opened()
        await self.guarded(lambda: worker.ask(op="add", text=event.text,
                                              clock=[event.clock, event.task_index, event.turn]))
        self.stored = await worker.ask(op="dump")
        self.worker_clock = await worker.ask(op="clock")

    # -- read paths ----------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        worker = await self.opened()
        found = await self.guarded(lambda: worker.ask(op="search", query=query, k=k))
        items = []
        for group in found or []:
            for result in group.get("search_result") or []:
                # Its `score` is a vector distance (lower is nearer): kept as `distance`, in its order.
                native = {name: value for name, value in result.items() if name not in ("id", "text", "score")}
                items.append(MemoryItem(str(result.get("id")), str(result.get("text", "")), None,
                                        {**native, "distance": result.get("score")}))
        return items[:k]

    def dump(self) -> list[dict]:
        return deep_copy([{**node, "content": node_text(node)} for node in self.stored])

    # -- state ---------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        return {**super().snapshot(), "worker_clock": deep_copy(self.worker_clock)}

    async def restore(self, state: dict) -> None:
        await super().restore(state)
        self.worker_clock = deep_copy(state["worker_clock"])
        if self.worker_clock is not None:  # the worker's clock continues where the first run's stood
            await (await self.opened()).ask(op="set_clock", state=self.worker_clock)


def node_text(node: dict) -> str:
    """What a graph node says: its text (chunks, summaries), else its name and description."""
    if node.get("text"):
        return str(node["text"])
    name, description = node.get("name") or "", node.get("description") or ""
    return f"{name}: {description}" if name and description else name or description


def tiktoken_cache(python: Path) -> str | None:
    """The local copy of the token encodings cognee counts with (scripts/library_env.sh puts one
    in its environment), so that nothing is downloaded."""
    folder = python.parent.parent / "tiktoken_cache"
    return str(folder) if folder.is_dir() else None


class Worker:
    """One cognee worker process; one request at a time."""

    def __init__(self, process: asyncio.subprocess.Process, log):
        self.process, self.log = process, log
        self.lock = asyncio.Lock()

    @classmethod
    async def start(cls, python: Path, setup: dict) -> "Worker":
        log = tempfile.TemporaryFile()  # cognee's own output: shown when the worker dies
        process = await asyncio.create_subprocess_exec(
            str(python), str(WORKER), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
            limit=2 ** 26)
        worker = cls(process, log)
        await worker.send(setup)
        return worker

    async def ask(self, **request):
        return await self.send(request)

    async def send(self, message: dict):
        async with self.lock:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            await self.process.stdin.drain()
            line = await self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the cognee worker stopped: {self.tail()}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise WorkerFailed(answer["error"])
        return answer["result"]

    def tail(self) -> str:
        self.log.seek(0)
        lines = self.log.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "(no output)"

    def stop(self) -> None:
        if self.process.returncode is None:
            try:
                self.process.kill()
            except ProcessLookupError:
                pass
        self.log.close()

