"""Runs: which memory system ran on which benchmark, with what configuration and prompts."""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from memaudit.errors import BadInput
from memaudit.store.rows import Row, Statement, dumps, loads
from memaudit.types import USER_INGEST

if TYPE_CHECKING:
    from memaudit.store import Store


class RunBusy(BadInput):
    """Another process is writing this run (a second `rollout` of the same run)."""


@dataclass(frozen=True)
class RunConfig:
    """What a rollout ran with (`runs.config`). `users` None = every user of the benchmark;
    `imported_from` names the release directory of an imported run; `transcripts` marks a
    teacher-forced run (memaudit/rollout/teacher_forced.py): the run whose recorded episodes were
    fed to its memory, None for a live or imported run; `provenance` is how the run was made
    (memaudit/provenance.py: protocol version, per role model, dialect, sampling sent and context
    window; a teacher-forced run's also a digest of the episodes replayed), None for an imported
    run or one recorded before provenance existed. `ingest`: what a deployed library was given
    (adapters/base.py INGEST_MODES), recorded only when not the published study's `user`, so every
    run made before it existed compares, resumes and replays as it was."""
    users: list[str] | None = None
    tasks: int | None = None
    max_turns: int = 25
    k: int = 5
    tag: str | None = None
    imported_from: str | None = None
    transcripts: str | None = None
    provenance: dict | None = None
    ingest: str = USER_INGEST

    def to_json(self) -> dict:
        out = {"users": self.users, "tasks": self.tasks, "max_turns": self.max_turns, "k": self.k, "tag": self.tag}
        if self.ingest != USER_INGEST:
            out["ingest"] = self.ingest
        if self.imported_from is not None:
            out["imported_from"] = self.imported_from
        if self.transcripts is not None:
            out["transcripts"] = self.transcripts
        if self.provenance is not None:
            out["provenance"] = self.provenance
        return out

    @classmethod
    def from_json(cls, data: dict | None) -> "RunConfig":
        data = data or {}
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


@dataclass(frozen=True)
class Run:
    run: str
    system: str
    bench: str
    origin: str                      # rollout | import
    config: RunConfig
    prompt_hashes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RunRow(Row):
    TABLE = "runs"
    ENCODE = {"config": lambda config: dumps(config or {}), "prompt_hashes": lambda hashes: dumps(hashes or {})}
    run: str
    system: str
    bench: str
    origin: str = "rollout"
    config: dict | None = None
    prompt_hashes: dict | None = None


class Runs:
    def __init__(self, db: "Store"):
        self.db = db

    @staticmethod
    def statement(run: str, system: str, bench: str, *, origin: str = "rollout", config: dict | None = None,
                  prompt_hashes: dict | None = None) -> Statement:
        return RunRow(run, system, bench, origin, config, prompt_hashes).statement()

    async def ensure(self, run: str, system: str, bench: str, *, origin: str = "rollout",
                     config: dict | None = None, prompt_hashes: dict | None = None) -> Run:
        found = await self.get(run)
        if found is not None:
            if found.system != system or found.bench != bench:
                raise BadInput(f"run {run!r} already exists for system {found.system} on benchmark "
                               f"{found.bench}; use --tag to start a new run", field="run")
            return found
        await self.db.write([self.statement(run, system, bench, origin=origin, config=config,
                                            prompt_hashes=prompt_hashes)])
        return await self.get(run)

    async def record_in_provenance(self, run: str, name: str, value) -> None:
        """Set `name` in the run's recorded provenance (what a rollout learned while it ran)."""
        config = (await self.require(run)).config
        provenance = {**(config.provenance or {}), name: value}
        await self.db.write([("UPDATE runs SET config=? WHERE run=?",
                              (dumps(replace(config, provenance=provenance).to_json()), run))])

    def lock(self, run: str):
        """Hold `run` for this process while it writes the run's episodes: a second process asking
        for the same run gets RunBusy at once. An advisory lock on `<store>.locks/<run>.lock`, which
        the system drops when the holder exits, however it exits (a SIGKILLed rollout leaves no
        stale lock behind). The lock files stay: removing one could race with a process opening it."""
        path = self.db.path
        if str(path) == ":memory:":
            return nullcontext()
        return _file_lock(path.with_name(path.name + ".locks") / f"{run}.lock", run, path)

    async def drop_if_empty(self, run: str) -> None:
        """Delete the run row if no episode was written under it: an empty row would pin the
        run's settings although nothing ran with them."""
        await self.db.write([("DELETE FROM runs WHERE run=? AND NOT EXISTS (SELECT 1 FROM episodes WHERE run=?)",
                              (run, run))])

    async def row(self, run: str) -> dict | None:
        """The run as a dict with its JSON columns decoded (config and prompt_hashes as stored): what
        the report shows; everything else takes the typed Run (`get`)."""
        row = await self.db.fetchone("SELECT * FROM runs WHERE run=?", (run,))
        if row is None:
            return None
        out = dict(row)
        out["config"], out["prompt_hashes"] = loads(row["config"]), loads(row["prompt_hashes"])
        return out

    async def names(self) -> list[str]:
        return [r["run"] for r in await self.db.fetchall("SELECT run FROM runs ORDER BY run")]

    async def get(self, run: str) -> Run | None:
        row = await self.row(run)
        return None if row is None else _typed(row)

    async def require(self, run: str) -> Run:
        found = await self.get(run)
        if found is None:
            raise BadInput(f"unknown run {run!r}", field="runs")
        return found

    async def list(self) -> list[Run]:
        return [_typed(await self.row(name)) for name in await self.names()]


@contextmanager
def _file_lock(path: Path, run: str, store_path: Path):
    try:
        path.parent.mkdir(exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise BadInput(f"cannot create the run lock {path.name} beside the store ({exc.strerror}); "
                       "the store's directory must be writable", file=str(store_path)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusy(f"run {run!r} is busy: another memaudit rollout is writing it into this store; "
                          "wait for it to finish (then rerun to resume), or use --tag for a separate run",
                          file=str(store_path)) from None
        yield
    finally:
        os.close(fd)  # closing drops the lock


def _typed(row: dict) -> Run:
    return Run(row["run"], row["system"], row["bench"], row["origin"], RunConfig.from_json(row["config"]),
               row["prompt_hashes"] or {})


async def select_runs(store: "Store", wanted: list[str] | None, *, origin: str | None = None) -> list[Run]:
    """The runs a command works on: `wanted` in the order given (a run named twice once), or every
    run in the store sorted by id when None. `origin` keeps only rollout (or imported) runs. An
    unknown name is a BadInput naming it and the runs there are."""
    known = {r.run: r for r in await store.runs.list() if origin is None or r.origin == origin}
    if wanted is None:
        return list(known.values())
    missing = [name for name in wanted if name not in known]
    if missing:
        kind = f"{origin} runs" if origin else "runs"
        raise BadInput(f"unknown run {missing[0]!r}: no such run in the store ({kind} there: "
                       f"{', '.join(known) or 'none'})", field="runs")
    return [known[name] for name in dict.fromkeys(wanted)]
