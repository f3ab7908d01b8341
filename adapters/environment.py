"""A deployed library in an environment of its own: a declaration, not a worker written per library.

A library that does not install beside memaudit's others (pip: ResolutionImpossible) declares

    class SomeLib(InEnvironment):    # a DeployedLibrary (adapters/deployed.py)
        name, library = "somelib", "somelib"
        CALLS_PER_MESSAGE = 2.0
        ENVIRONMENT = "somelib"      # its environment, built from the extra `somelib`
        WORKER = SomeLibWorker       # the half that runs there (adapters/environment_worker.py)

Its environment is `.venv-<ENVIRONMENT>` in the checkout (`make install` builds every declared one:
scripts/library_env.sh installs memaudit's core dependencies beside the extra, one resolution), or
the Python named by `MEMAUDIT_<ENVIRONMENT>_PYTHON`. Each user's library is a worker process there
(one JSON request a line over stdin/stdout), running the parent's own memaudit source, loaded by
path; its model and embedding calls go over HTTP to the recording proxy of this process, under the
adapter's role, cached, counted and replayed like every call. A rollout runs at most
`--library-workers` users of such systems at once, and an adapter stops its worker when it is
closed (its user done). A worker ends when its parent dies."""
from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path
from typing import ClassVar

import memaudit
from memaudit.adapters import environment_worker
from memaudit.adapters.base import Event
from memaudit.adapters.deployed import DeployedLibrary, Endpoint, ReplayedMessages
from memaudit.adapters.environment_worker import LibraryWorker
from memaudit.adapters.registry import install_hint
from memaudit.errors import BadInput, MemauditError
from memaudit.scratch import owned_prefix, remove_stale
from memaudit.types import MemoryItem

CHECKOUT = Path(__file__).resolve().parent.parent
FOLDER_PREFIX = "memaudit-library-"  # each worker's data folder (removed when it stops, or when stale)
# The worker's first lines: the parent's memaudit package, loaded by path (whatever memaudit the
# environment may hold, and with the working folder off sys.path, where a file could shadow the
# library), then the worker loop. argv: memaudit's __init__.py, the parent's pid.
BOOT = ("import importlib.util as u, os, sys; sys.path[:] = [p for p in sys.path if p]; "
        "s = u.spec_from_file_location('memaudit', sys.argv[1], "
        "submodule_search_locations=[os.path.dirname(sys.argv[1])]); "
        "m = sys.modules['memaudit'] = u.module_from_spec(s); s.loader.exec_module(m); "
        "from memaudit.adapters.environment_worker import main; main(int(sys.argv[2]))")
PROBE = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"


def python_variable(environment: str) -> str:
    return f"MEMAUDIT_{environment.upper()}_PYTHON"


def checkout_environment(environment: str) -> Path:
    return CHECKOUT / f".venv-{environment}"


def environment_python(environment: str) -> Path:
    """The Python of a library's environment: its variable, else the checkout's `.venv-<name>`."""
    named = os.environ.get(python_variable(environment))
    return Path(named) if named else checkout_environment(environment) / "bin" / "python"


def library_version(environment: str, distribution: str) -> str:
    """The library's version in its environment; BadInput saying how to get one when it has none."""
    python = environment_python(environment)
    found = version_in(python, distribution)
    if found is None:
        raise BadInput(f"the {distribution} library runs in its own environment: `make install` builds "
                       f"{checkout_environment(environment).name} (scripts/library_env.sh), or set "
                       f"{python_variable(environment)} to a Python with the `{environment}` extra "
                       f"({install_hint(environment)} in a separate environment); {python} has no {distribution}",
                       field="systems")
    return found


@functools.cache
def version_in(python: Path, distribution: str) -> str | None:
    """The distribution's version in that Python (None: it has none, or does not run)."""
    try:
        found = subprocess.run([str(python), "-c", PROBE, distribution], capture_output=True, text=True, timeout=120)
    except OSError:
        return None
    return found.stdout.strip() if found.returncode == 0 else None


def offline(python: Path) -> dict:
    """The worker's environment variables: nothing fetched from a hub at run time, one string-hash
    seed, and the token encodings libraries count with (tiktoken's) read from the copy in the
    environment (scripts/library_env.sh puts one there)."""
    # One string-hash seed for every worker: a library that iterates a set of names (Letta builds its
    # agent's tool rules from one, in its prompt) then puts them in one order, and its calls' cache
    # keys do not change from one process to the next (a replay would miss the cache).
    variables = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONHASHSEED": "0"}
    encodings = python.parent.parent / "tiktoken_cache"
    if encodings.is_dir():
        variables["TIKTOKEN_CACHE_DIR"] = str(encodings)
    return variables


def declared_environments() -> list[str]:
    """The environments the built-in adapters declare (`ENVIRONMENT = "name"` in a class body),
    read from their source: `make install` builds these, and an adapter whose environment is not
    built yet refuses to be imported."""
    import ast
    import importlib.util

    from memaudit.adapters.registry import BUILTIN_ORIGIN, registrations

    def declared(statement) -> str | None:
        targets = statement.targets if isinstance(statement, ast.Assign) else \
            [statement.target] if isinstance(statement, ast.AnnAssign) else []
        value = getattr(statement, "value", None)
        if any(isinstance(t, ast.Name) and t.id == "ENVIRONMENT" for t in targets) and \
                isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
        return None

    found = set()
    for registration in registrations():
        if registration.origin == BUILTIN_ORIGIN:
            source = Path(importlib.util.find_spec(registration.target.partition(":")[0]).origin).read_text()
            found.update(declared(statement) for node in ast.walk(ast.parse(source))
                         if isinstance(node, ast.ClassDef) for statement in node.body)
    return sorted(found - {None})


class WorkerFailed(Exception):
    """The library raised in the worker (its exception, by type and message): a failed call."""


class WorkerDied(MemauditError):
    """The worker process ended: the command cannot go on with this library (one line, its last words)."""


class Worker:
    """One worker process; one request at a time."""

    def __init__(self, process: asyncio.subprocess.Process, log, folder: str):
        self.process, self.log, self.folder = process, log, folder
        self.lock = asyncio.Lock()
        self.version = None

    @classmethod
    async def start(cls, python: Path, worker: type[LibraryWorker], setup: dict) -> "Worker":
        remove_stale(Path(tempfile.gettempdir()), FOLDER_PREFIX)  # left by a killed memaudit
        folder = tempfile.mkdtemp(prefix=owned_prefix(FOLDER_PREFIX))
        log = tempfile.TemporaryFile()  # the library's own output: its last line is shown if it dies
        process = await asyncio.create_subprocess_exec(
            str(python), "-c", BOOT, memaudit.__file__, str(os.getpid()), cwd=folder, env=offline(python),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log, limit=2 ** 26)
        started = cls(process, log, folder)
        try:
            answer = await started.send({"worker": f"{worker.__module__}:{worker.__qualname__}", "setup": setup,
                                         "folder": folder})
        except BaseException:
            started.stop()
            raise
        started.version = answer["version"]
        return started

    async def call(self, op: str, args: dict, clock) -> object:
        """The op's result; the worker's clock state after it is loaded into `clock` (also when the
        library raised: WorkerFailed)."""
        return await self.send({"op": op, "args": args, "clock": clock.to_state()}, clock)

    async def send(self, message: dict, clock=None):
        async with self.lock:
            try:
                self.process.stdin.write((json.dumps(message) + "\n").encode())
                await self.process.stdin.drain()
                line = await self.process.stdout.readline()
            except (ConnectionError, BrokenPipeError):
                line = b""
        if not line:
            raise WorkerDied(f"the library's worker process stopped: {self.tail()}")
        answer = json.loads(line)
        if clock is not None:
            clock.load_state(answer["clock"])
        if not answer["ok"]:
            raise WorkerFailed(answer["error"])
        return answer["result"]

    def tail(self) -> str:
        if self.log.closed:
            return "(stopped)"
        self.log.seek(0)
        lines = self.log.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "(no output)"

    async def aclose(self) -> None:
        """Stop, and wait for the process to end (its pipes then close in this event loop)."""
        self.stop()
        await self.process.wait()

    def stop(self) -> None:
        """End the process and remove its folder (idempotent)."""
        if self.process.returncode is None:
            try:
                self.process.kill()
            except ProcessLookupError:
                pass
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class InEnvironment(ReplayedMessages, DeployedLibrary):
    """The parent half of an adapter over a library in its own environment: the library instance
    is its worker; its state is the messages given to the library (added again on restore, every
    call answered from the cache), its clock the worker's. The worker half serves `add(text)`,
    `search(query, k)` (items as `{"id", "content", "score", …native fields}`, best first) and
    `dump()` (`{"id", "content", …}`)."""
    ENVIRONMENT: ClassVar[str]  # the environment, and the extra it is built from
    WORKER: ClassVar[type[LibraryWorker]]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "ENVIRONMENT" in vars(cls) and not environment_worker.SERVING:
            cls.library_release()  # a missing environment fails when the module is imported, before a run opens

    @classmethod
    def library_release(cls) -> str:
        return f"{cls.library}=={library_version(cls.ENVIRONMENT, cls.library)}"

    def worker_setup(self) -> dict:
        """What the worker half needs besides the endpoint (override to add)."""
        return {}

    async def open(self, endpoint: Endpoint) -> Worker:
        setup = {"base_url": endpoint.base_url, "model": endpoint.model, "embed_model": endpoint.embed_model,
                 "dimensions": await self.dimensions(), "scope": self.ctx.scope, "telemetry": self.TELEMETRY,
                 **self.worker_setup()}
        worker = await Worker.start(environment_python(self.ENVIRONMENT), self.WORKER, setup)
        weakref.finalize(self, worker.stop)
        return worker

    async def call(self, op: str, **args):
        """One op of the worker half, on this adapter's logical clock (its state goes to the
        worker and comes back)."""
        return await (await self.opened()).call(op, args, self.clock)

    # -- write path ----------------------------------------------------------------------------
    async def add(self, event: Event) -> None:
        await self.opened()
        await self.guarded(lambda: self.call("add", text=self.said_text(event)))
        self.stored = await self.call("dump")

    # -- read paths ----------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        await self.opened()
        found = await self.guarded(lambda: self.call("search", query=query, k=k))
        return [MemoryItem(str(item["id"]), str(item["content"]), item.get("score"),
                           {name: value for name, value in item.items() if name not in ("id", "content", "score")})
                for item in (found or [])[:k]]

    async def close(self) -> None:
        if self.instance is not None:
            await self.instance.aclose()
            self.instance = None


if __name__ == "__main__":  # `make install`: the environments to build, one a line
    print("\n".join(declared_environments()))
