"""Commands: batch status | collect | resubmit, and what the `--batch` / `--batch-file DIR` options of
the stages whose calls can wait (memaudit/stages.py `batchable`; cli/common.py `stage_options`) do:
every call goes through the OpenAI Batch API or vLLM's batch runner instead of being made live
(memaudit/llm/batch.py)."""
from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

import click
import orjson

from memaudit.cli.common import STORE, Group, current_settings, global_options, run
from memaudit.errors import BadInput


@asynccontextmanager
async def batched(rt, roles, use_batch: bool, batch_file: Path | None):
    """Run a stage with every call it makes collected into batches (`--batch`; the Batch API needs an
    endpoint for each of its `roles`), then send what it recorded and say what the stage waits for;
    without --batch, run it as it is."""
    if not use_batch and batch_file is None:
        yield
        return
    from memaudit.llm.batch import BatchCollector, endpoint_of, submit

    if rt.settings.cache != "rw":
        raise BadInput(f"--batch needs --cache rw (results come back through the call cache), not "
                       f"{rt.settings.cache}", field="cache")
    if batch_file is None:
        for role in roles:
            endpoint_of(rt.settings, role)
    with rt.llm.batching(BatchCollector(rt.store, rt.llm.refusals)) as collector:
        yield
    for line in await submit(rt.store, rt.settings, batch_file):
        click.echo(f"memaudit: batch: {line}", err=True)
    await _say_waiting(rt.store, collector.keys, batch_file is not None)


async def _say_waiting(store, keys: list[str], files: bool) -> None:
    from memaudit.llm.batch import FILE_RUNNER

    if not keys:
        click.echo("memaudit: batch: nothing to wait for: every call of this stage is in the cache", err=True)
        return
    for name, status, batch_id, n in await store.batches.waiting(keys):
        where = "waiting to be sent" if name is None else f"in {batch_id or name} ({status})"
        click.echo(f"memaudit: batch: waiting for {n} results {where}", err=True)
    then = (f"run `{FILE_RUNNER}` on each file written, then `memaudit batch collect --from OUTPUT`" if files
            else "run `memaudit batch status`; once done, `memaudit batch collect`")
    click.echo(f"memaudit: batch: {then}, then this command again", err=True)


# What the batch commands read: the store, and the endpoint each batch went to (--config's roles).
BATCHES = STORE + ("base_url", "model", "backend", "timeout")


@click.group("batch", cls=Group)
def batch():
    """Batch API scoring: the state of the batches sent, collecting their results, sending again."""


@batch.command("status")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per batch")
@global_options(uses=BATCHES)
def status(as_json):
    """Each batch's state and request counts (as last collected), and the requests waiting to be sent."""
    run(_status, current_settings(), as_json)


async def _status(settings, as_json: bool) -> None:
    from memaudit.llm.batch import refresh
    from memaudit.store import open_store

    async with open_store(settings.db) as store:
        await refresh(store, settings)
        pending = await store.batches.pending_counts()
        batches = await store.batches.batches()
        if not batches and not pending and not as_json:
            click.echo("no batches in this store (`score`, `attribute` or `judge-check` with --batch sends some)")
        for b in batches:
            row = {"batch": b["batch_id"] or b["name"], "status": b["status"], "requests": b["requests"],
                   "counts": b["counts"], "collected": bool(b["collected"]), "waiting": pending.get(b["name"], 0),
                   "endpoint": b["endpoint"]}
            if as_json:
                click.echo(orjson.dumps(row).decode())
                continue
            counts = b["counts"]
            done = f", {counts.get('completed', 0)} completed, {counts.get('failed', 0)} failed" if counts else ""
            state = "collected" if b["collected"] else f"{row['waiting']} waiting for collect"
            click.echo(f"{row['batch']}: {b['status']}, {b['requests']} requests{done}; {state}")
        unsent = pending.get(None, 0)
        if as_json:
            click.echo(orjson.dumps({"batch": None, "status": "unsent", "waiting": unsent}).decode())
        elif unsent:
            click.echo(f"{unsent} requests waiting to be sent: `memaudit batch resubmit` or the stage with --batch")


@batch.command("collect")
@click.option("--from", "from_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="import the output file of vLLM's batch runner instead of downloading finished batches")
@global_options(uses=BATCHES)
def collect(from_file):
    """Download the output and error files of finished batches and store every result in the call cache."""
    run(_collect, current_settings(), from_file)


async def _collect(settings, from_file: Path | None) -> None:
    from memaudit.llm.batch import Collector, collect as collect_batches, import_output
    from memaudit.llm.dialects import Refusals
    from memaudit.roles import ROLE_SPECS

    async def lines(store) -> list[str]:
        checks = {name: spec.check for name, spec in ROLE_SPECS.items()}
        collector = Collector(store, settings, checks, Refusals(store.calls))
        said = [await import_output(collector, from_file)] if from_file else await collect_batches(collector)
        unsent = (await store.batches.pending_counts()).get(None, 0)
        again = [f"{unsent} requests to send again: `memaudit batch resubmit`, or the stage with --batch"]
        return (said or ["no batch to collect"]) + (again if unsent else [])

    await _echo_lines(settings, lines)


@batch.command("resubmit")
@click.option("--batch-file", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="write the input files into DIR for vLLM's batch runner instead of uploading them")
@global_options(uses=BATCHES)
def resubmit(batch_file):
    """Send every request that waits to be sent again (no result yet: 429, 5xx, expired, a repair)."""
    run(_resubmit, current_settings(), batch_file)


async def _resubmit(settings, batch_file: Path | None) -> None:
    from memaudit.llm.batch import submit

    async def lines(store) -> list[str]:
        return await submit(store, settings, batch_file) or ["nothing to send"]

    await _echo_lines(settings, lines)


async def _echo_lines(settings, lines) -> None:
    """Open the store and print, one a line, what `lines(store)` did (collect, resubmit)."""
    from memaudit.store import open_store

    async with open_store(settings.db) as store:
        for line in await lines(store):
            click.echo(line)


COMMANDS = [batch]
