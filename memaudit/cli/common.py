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
# with a flag is an option of the top-level command, and of each command that reads it
# (`memaudit --db X tables` and `memaudit tables --db X` both work).
FLAG_TYPES = {"text": None, "int": int, "float": float, "file": click.Path(path_type=Path),
              "dir": click.Path(path_type=Path, file_okay=False)}
FLAGGED = tuple(o for o in OPTIONS if o.flag)
SETTING_OF_FLAG = {o.flag: o.name for o in FLAGGED}


def _flag(option):
    kind = option.kind
    param_type = click.Choice(kind.choices) if isinstance(kind, Choice) else FLAG_TYPES[kind.cli]
    return click.option(option.flag, option.name, type=param_type, default=None, help=option.help_text)


GLOBAL_OPTIONS = [_flag(o) for o in FLAGGED]

# -- the settings a command takes --------------------------------------------------------------
# A command takes the settings it reads and no other: its help lists only those. Another given on
# its command line or before its name is accepted and ignored (a script may hand every command the
# same settings). The settings come in groups that commands read together; a
# command that reads a setting a config file can give reads the config file too.
# tests/cli/test_command_options.py runs every command and holds what it takes to what it read.
STORE = ("db", "config")
MODEL = ("base_url", "model", "backend", "concurrency", "cache", "seed", "timeout", "rpm", "tpm", "prompts_dir")
MEMORY = ("embed_model", "memt_prompts")  # the memory systems'
# What a rollout reads besides (the runner: how many users of a library in its own environment run at once).
WORKERS = ("library_workers",)


class Given(dict):
    """The settings a command takes, as the user gave them (on its command line, else before its
    name; None: not given): load_settings resolves them (flag > environment > config file > default)."""


def global_options(fn=None, *, uses: tuple[str, ...]):
    """Take the settings `uses` names (the ones the command reads) on the command itself too
    (`memaudit rollout --db X …`). Which a command takes is in its params."""
    if fn is None:
        unknown = set(uses) - set(SETTING_OF_FLAG.values())
        if unknown:
            raise TypeError(f"global_options(uses=...): no global option is named {', '.join(sorted(unknown))}")
        return functools.partial(global_options, uses=uses)
    for option in reversed([o for o in FLAGGED if o.name in uses]):
        fn = _flag(option)(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        ctx = click.get_current_context()
        group = ctx.find_root().params
        own = {name: kwargs.pop(name) for name in uses if name in kwargs}  # taken out: fn never sees them
        ctx.obj = Given({name: value if value is not None else group.get(name) for name, value in own.items()})
        return fn(*args, **kwargs)
    return wrapper


def given(name: str):
    """A setting the command takes, as the user gave it (None: not given), for a command that needs
    the given value rather than the resolved one (`serve --engine vllm --model NAME`)."""
    return click.get_current_context().obj[name]


# -- help: a command's options in three groups -------------------------------------------------
# `memaudit COMMAND --help` lists its options under Study (what is run, read or computed, and where
# it is recorded), Model (which endpoint answers and how the calls are made) and Output (what is
# printed or written), grouped by parameter name (a name means one thing across commands); the
# options of `serve` itself all concern the server it starts. tests/cli/test_command_options.py
# fails for an option in no group.
HELP_GROUPS = {
    "study": ("db", "config", "seed", "prompts_dir", "memt_prompts", "bench_ref", "benches", "systems", "system",
              "users", "n_users", "tasks", "max_turns", "tag", "k", "k_text", "transcripts", "ingest", "shard", "shards",
              "mode",
              "runs", "run_id", "role", "artifact", "failed", "embeddings", "dims", "variant", "threshold", "compare",
              "bootstrap", "name", "tasks_dir", "pool_path", "order", "hints", "edits", "recheck", "evolving",
              "per_category", "max_false_pass", "min_pass", "stages", "pilot_db", "store_path", "queries_path", "into",
              "partial", "from_file", "time_alone", "library_workers"),
    "model": ("base_url", "model", "backend", "concurrency", "cache", "timeout", "rpm", "tpm", "embed_model",
              "use_batch", "batch_file", "judges", "repeats", "judge_model", "judge_prompt", "reader_model",
              "context_window"),
    "output": ("fmt", "out", "out_dir", "as_json", "quiet", "only", "limit", "archive", "report_dir", "user_data",
               "serve", "port", "audit", "prices_file", "emit", "cpus", "mem_gb", "time_limit", "partition", "image",
               "volume", "mount", "secret"),
}
GROUP_OF = {name: group for group, names in HELP_GROUPS.items() for name in names}
OWN_OPTIONS_GROUP = {"serve": "model"}


def help_group(command: click.Command, param: click.Parameter) -> str | None:
    """The help group of one of the command's options (None: in no group)."""
    if command.name in OWN_OPTIONS_GROUP and param.name not in SETTING_OF_FLAG.values():
        return OWN_OPTIONS_GROUP[command.name]
    return GROUP_OF.get(param.name)


def format_grouped_options(command: click.Command, ctx: click.Context, formatter: click.HelpFormatter) -> None:
    """The options under their groups, then --help (arguments are in the usage line)."""
    sections: dict[str, list] = {group: [] for group in (*HELP_GROUPS, "other")}
    for param in command.params:
        record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
        if record is not None:
            sections[help_group(command, param) or "other"].append(record)
    sections["other"].append(command.get_help_option(ctx).get_help_record(ctx))
    for group, records in sections.items():
        if records:
            with formatter.section(f"{group.capitalize()} options"):
                formatter.write_dl(records)


class Command(click.Command):
    """A command whose help groups its options (HELP_GROUPS), and whose command line accepts and
    ignores a global setting it does not read."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        format_grouped_options(self, ctx, formatter)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self.without_unread_settings(ctx, args))

    def without_unread_settings(self, ctx: click.Context, args: list[str]) -> list[str]:
        """The command line without the global settings this command does not read: they are
        accepted and ignored, as before the command's name, so a script that hands every command the
        same settings still runs (and its errors stay one line)."""
        own = {p.name for p in self.params}
        kept, rest = [], list(args)
        while rest:
            arg = rest.pop(0)
            if arg == "--":
                kept += [arg, *rest]
                break
            flag = arg.split("=", 1)[0]
            if SETTING_OF_FLAG.get(flag, "") and SETTING_OF_FLAG[flag] not in own:
                if "=" not in arg and rest:
                    rest.pop(0)  # its value
                continue
            kept.append(arg)
        return kept


class Group(click.Group):
    """A command group whose help groups its options too, as do its commands'."""
    command_class = Command
    group_class = type  # a group in it is a Group

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        format_grouped_options(self, ctx, formatter)
        self.format_commands(ctx, formatter)


command = functools.partial(click.command, cls=Command)


def settings_from(ctx_obj: dict, **extra):
    from memaudit.config import load_settings

    return load_settings(**(ctx_obj or {}), **extra)


def current_settings(**extra):
    return settings_from(click.get_current_context().obj, **extra)


def stage_options(stage):
    """The options a stage's command takes because of what the stage is (memaudit/stages.py):
    `--batch` and `--batch-file` when its calls can wait for a batch, `--shard` when its work splits
    into (system, user) cells."""
    def apply(fn):
        if stage.shardable:
            fn = shard_option(fn, stage)
        return batch_options(fn) if stage.batchable else fn
    return apply


def batch_options(fn):
    fn = click.option("--batch-file", type=click.Path(path_type=Path, file_okay=False), default=None,
                      help="as --batch, but write the input files into DIR for vLLM's batch runner instead "
                           "of uploading them")(fn)
    return click.option("--batch", "use_batch", is_flag=True,
                        help="send this stage's model calls as Batch API batches instead of calling live; "
                             "`memaudit batch collect`, then the same command, finishes")(fn)


def shard_option(fn, stage):
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
            run(_record_stage, current_settings().db, stage.name, shard)
        return result

    recorded.records_shard_stage = stage
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
    are: the store raises StoreError). Secrets removed from the answers are counted and said once."""
    from memaudit.errors import BadInput
    from memaudit.llm.secrets import counting_echoes

    with counting_echoes() as echoes:
        try:
            result = anyio.run(_cancelled_by_signals, functools.partial(coro_fn, *args, **kwargs))
        except OSError as exc:
            if exc.errno not in PATH_ERRNOS or exc.filename is None:
                raise
            raise BadInput(f"cannot write or read there: {exc.strerror}", file=str(exc.filename)) from None
    if echoes.count:  # once, after the command's own output (an error stays its one line)
        click.echo(f"memaudit: {echoes.line()}", err=True)
    return result
