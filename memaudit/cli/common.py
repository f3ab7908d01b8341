"""Shared pieces of the command line: global options, settings resolution, running async code."""
from __future__ import annotations

import errno
import functools
import signal
import sys
from pathlib import Path

import anyio
import click

from memaudit.config import OPTIONS, Choice
from memaudit.types import RUBRIC

# rich, the settings and the store are imported where used: a command's module loads only what that
# command needs, and `memaudit --help` almost nothing (tests/cli/test_lazy_cli.py).


def __getattr__(name: str):
    """`console` (stderr) and `out` (stdout), rich consoles made when a command module first
    imports them: rich costs start-up time that commands printing through click need not pay."""
    if name not in ("console", "out"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    global console, out
    console = Console(stderr=True)
    # Piped output (a log, CI) gets room for the wide tables; a terminal keeps its own width.
    out = Console() if sys.stdout.isatty() else Console(width=160)
    return globals()[name]


# The threshold comes from the rubric: the help text cannot drift from what attribution does.
ATTRIBUTE_HELP = f"Stages 0-2 of failure attribution for every target scored below {RUBRIC.recovered:g}."

# The global options, derived from the settings table (memaudit/config.py OPTIONS): every setting
# with a flag is an option of the top-level command and of each command (`memaudit --db X tables`
# and `memaudit tables --db X` both work).
FLAG_TYPES = {"text": None, "int": int, "float": float, "file": click.Path(path_type=Path),
              "dir": click.Path(path_type=Path, file_okay=False)}
FLAGGED = tuple(o for o in OPTIONS if o.flag)


def _flag(option):
    kind = option.kind
    param_type = click.Choice(kind.choices) if isinstance(kind, Choice) else FLAG_TYPES[kind.cli]
    return click.option(option.flag, option.name, type=param_type, default=None, help=option.help_text)


GLOBAL_OPTIONS = [_flag(o) for o in FLAGGED]


def global_options(fn=None, *, uses: tuple[str, ...] | None = None):
    """Accept the global options on the command itself too (`memaudit rollout --db X …`): every one,
    or the settings `uses` names (the ones the command reads). Which a command takes is in its params
    (`[p.name for p in command.params if p.name in config.OPTION]`); one it does not take is still
    accepted before the command's name."""
    if fn is None:
        return functools.partial(global_options, uses=uses)
    for option in reversed([o for o in FLAGGED if uses is None or o.name in uses]):
        fn = _flag(option)(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        ctx = click.get_current_context()
        group = ctx.find_root().params
        own = {o.name: kwargs.pop(o.name, None) for o in FLAGGED}  # always taken out: fn never sees them
        ctx.obj = {name: value if value is not None else group.get(name) for name, value in own.items()}
        return fn(*args, **kwargs)
    return wrapper


def settings_from(ctx_obj: dict, **extra):
    from memaudit.config import load_settings

    return load_settings(**(ctx_obj or {}), **extra)


def current_settings(**extra):
    return settings_from(click.get_current_context().obj, **extra)


def shard_option(fn):
    """`--shard I/N` or `--shard auto` (memaudit/shards.py): parsed before anything runs, so a bad
    spec, or `auto` outside a scheduler, is one line. A shard's command that ran to its end says so
    in its store, for the merge to name a shard that did not."""
    def parse(ctx, param, value):
        from memaudit.shards import parse_shard
        return parse_shard(value)

    @functools.wraps(fn)
    def recorded(*args, shard, **kwargs):
        result = fn(*args, shard=shard, **kwargs)
        if shard.count > 1:  # the merge names a shard that is missing (memaudit/store/shard_stages.py)
            run(_record_stage, current_settings().db, click.get_current_context().info_name, shard)
        return result

    recorded.records_shard_stage = True
    return click.option("--shard", default=None, metavar="I/N|auto", callback=parse,
                        help="only the (system, user) cells of shard I of N (1-based); auto: from the scheduler "
                             "(SLURM_ARRAY_TASK_ID/_MIN/_COUNT, JOB_COMPLETION_INDEX + MEMAUDIT_SHARDS, or "
                             "RANK/WORLD_SIZE); join the shards' stores with `memaudit merge`")(recorded)


async def _record_stage(db: Path, stage: str, shard) -> None:
    from memaudit.store import open_store

    async with open_store(db, create=False) as store:
        await store.shard_stages.record(stage, shard.index, shard.count)


def split_list(text: str | None) -> list[str] | None:
    """`a, b,c` -> ["a", "b", "c"]; nothing given -> None (meaning: all)."""
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


# File-system errors on a path the user chose (--out on a full or read-only disk, under a file …):
# one line naming the path. Other OSErrors are bugs and keep their traceback.
PATH_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.EDQUOT,
               errno.ENAMETOOLONG, errno.ELOOP, errno.EEXIST}


# The signals that stop a command: its work is cancelled, its cleanup runs (the embedded server is
# stopped, queued rows are committed, nothing is left half-written) and it exits 128 + the signal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The command was stopped by a signal (SIGINT or SIGTERM). A BaseException, like
    KeyboardInterrupt: no `except Exception` on the way up may swallow it."""

    def __init__(self, signum: int, after: str = "work already finished is kept in the store"):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.after = after  # what the one line says was kept or done


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def stop_on_signals() -> None:
    """Outside the event loop, SIGINT and SIGTERM raise Interrupted. Set explicitly: a process started
    in the background by a shell inherits SIGINT ignored, and would never stop on it."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_interrupted)


async def _cancelled_by_signals(coro_fn):
    """Run `coro_fn()`; the first SIGINT or SIGTERM cancels it and, once its cleanup has run, raises
    Interrupted. Inside the loop a signal is a cancellation, never an exception raised wherever the
    main thread happens to be (which could skip the cleanup that stops threads and children)."""
    caught: list[int] = []
    result = None
    try:
        async with anyio.create_task_group() as tg:
            async def watch() -> None:
                with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                    async for signum in signals:
                        caught.append(signum)
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
            result = await coro_fn()
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1:
            raise
        raise group.exceptions[0] from None  # the command's own error, as if no watcher ran beside it
    finally:
        stop_on_signals()  # the loop's handlers are gone: a second signal still raises Interrupted
        if caught:
            raise Interrupted(caught[0]) from None
    return result


def run(coro_fn, *args, **kwargs):
    """Run a command's coroutine; SIGINT or SIGTERM stop it cleanly (Interrupted). A file-system
    error on a path (PATH_ERRNOS) becomes a one-line error, not a traceback (store faults already
    are: the store raises StoreError)."""
    from memaudit.errors import BadInput

    try:
        return anyio.run(_cancelled_by_signals, functools.partial(coro_fn, *args, **kwargs))
    except OSError as exc:
        if exc.errno not in PATH_ERRNOS or exc.filename is None:
            raise
        raise BadInput(f"cannot write or read there: {exc.strerror}", file=str(exc.filename)) from None
