"""Commands: serve (the embedded model server in the foreground) and cache stats / merge."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import click
import orjson
from rich.table import Table

from memaudit.cli.common import (
    STORE, Group, Interrupted, command, console, current_settings, given, global_options, out, run)
from memaudit.errors import BadInput, MemauditError
from memaudit.llm.dialects import DIALECTS, ENGINES


class SmokeFailed(MemauditError):
    """The bundled model did not load or answer."""


def check_port_free(port: int) -> None:
    """Refuse a loopback port another process holds, before saying "serving on" it."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise BadInput(f"port {port} on 127.0.0.1 is not free ({exc.strerror}); choose another with --port",
                           field="port") from None


def check_gguf(path: Path) -> None:
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise BadInput("not a GGUF model file (llama.cpp loads GGUF only)", file=str(path), field="model-path")


def serve_fake(port: int) -> None:
    """The scripted fake model on loopback until Ctrl-C (memaudit/testing/fake_openai.py)."""
    import threading

    from memaudit.testing.http_server import scripted_fake, serve as serve_loopback

    with serve_loopback(scripted_fake(), port=port) as url:
        click.echo(f"serving the scripted fake model on {url}  (use --base-url {url} --model fake; "
                   "Ctrl-C stops it)", err=True)
        try:
            threading.Event().wait()
        except Interrupted as exc:  # it has no store: nothing was kept
            raise Interrupted(exc.signum, "the fake model server stopped") from None


@command("serve")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True, help="CPU threads for llama.cpp")
@click.option("--model-path", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="another GGUF instead of the bundled SmolLM2-135M-Instruct")
@click.option("--engine", type=click.Choice(ENGINES), default="llamacpp", show_default=True,
              help="the kind of server to start (its --backend name)")
@click.option("--smoke", is_flag=True, help="start the embedded model, ask it one short question, stop it "
              "(what `make install` ends with); exits non-zero naming the log when it fails")
@click.option("--log", "log_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="the server log of --smoke (default: memaudit-server.log next to --db)")
@click.option("--fake", is_flag=True, help="serve the scripted fake model instead (no build, no key: answers "
              "every role in the right shape, instantly; for trying memaudit, not for measuring anything)")
@global_options(uses=STORE + ("model",))
def serve(port, threads, model_path, engine, smoke, log_path, fake):
    """Run an OpenAI-compatible model server on loopback in the foreground (Ctrl-C stops it)."""
    if fake:
        check_port_free(port)
        serve_fake(port)
        return
    if smoke:
        from memaudit.llm.smoke import smoke_check
        log_path = log_path or current_settings().db.parent / "memaudit-server.log"
        try:
            answer = run(smoke_check, log_path.resolve(), threads=threads)
        except MemauditError as exc:
            raise SmokeFailed(f"smoke check of the embedded model failed: {exc}") from None
        click.echo(f"smoke check: the embedded model loaded and answered {answer!r}")
        return
    model = given("model")
    if model_path is not None:
        check_gguf(model_path)
    cmd = DIALECTS[engine].engine_command(port=port, threads=threads, model_path=model_path, model=model)
    check_port_free(port)
    console.print(f"serving on http://127.0.0.1:{port}/v1  (use --base-url http://127.0.0.1:{port}/v1"
                  f" --backend {engine})", highlight=False)
    proc = subprocess.Popen(cmd)
    try:
        code = proc.wait()
    except BaseException as exc:  # Interrupted (SIGINT, SIGTERM): the server stops with this command
        proc.terminate()
        proc.wait()
        if isinstance(exc, Interrupted):  # a server has no store: nothing was kept
            raise Interrupted(exc.signum, "the model server stopped") from None
        raise
    if code != 0:
        sys.exit(code)


@click.group("cache", cls=Group)
def cache():
    """The call cache in the store: statistics, and merging caches from other machines."""


@cache.command("stats")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
@global_options(uses=STORE)
def stats(as_json):
    """Per role: calls stored, failures, bytes, tokens, and cache hits/misses of artifacts."""
    rows = run(_with_store, current_settings(), _stats, create=False)
    if as_json:
        click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return
    table = Table("role", "stored", "failed", "bytes", "prompt tok", "completion tok", "hits", "misses")
    for r in rows:
        table.add_row(r["role"], *(f"{r[c]:,}" for c in ("stored", "failed", "bytes", "prompt_tokens",
                                                         "completion_tokens", "hits", "misses")))
    out.print(table)


@cache.command("merge")
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path))
@global_options(uses=STORE)
def merge(sources):
    """Add the calls and embeddings of other stores (SRC...) to this store; safe to repeat."""
    for r in run(_with_store, current_settings(), _merge, list(sources)):
        click.echo(f"{r['source']}: {r['calls_added']} calls added, {r['failures_replaced']} recorded failures "
                   f"replaced by answers, {r['embeddings_added']} embeddings added")


async def _with_store(settings, fn, *args, create: bool = True):
    from memaudit.store import open_store
    async with open_store(settings.db, create=create) as store:
        return await fn(store, *args)


async def _stats(store):
    from memaudit.llm.maintenance import cache_stats
    return await cache_stats(store)


async def _merge(store, sources):
    from memaudit.llm.maintenance import merge_caches
    return await merge_caches(store, sources)


COMMANDS = [serve, cache]
