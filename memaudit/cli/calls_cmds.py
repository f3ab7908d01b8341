"""Commands: calls — every recorded model call, filterable, as a table or JSON lines (like `llm
logs`): how a user traces any number in a table to the exact prompts behind it."""
from __future__ import annotations

import click
import orjson
from rich.table import Table

from memaudit.cli.common import STORE, command, current_settings, global_options, out, run

PREVIEW = 60  # characters of the last message and of the response shown in the table


def call_record(row: dict) -> dict:
    """One JSON line: the keyed request (messages and the parameters sent with them), the response
    text (or the recorded failure), usage, latency and whether the artifacts met it in the cache.
    No API key: the store never holds one."""
    request = {k: v for k, v in row["request"].items() if k not in ("v", "model")}
    response = row["response"]
    record = {"key": row["key"], "role": row["role"], "model": row["model"], "request": request,
              "response": response.get("text") if row["ok"] else None,
              "usage": {"prompt_tokens": row["prompt_tokens"], "completion_tokens": row["completion_tokens"],
                        "cached_tokens": row["cached_tokens"], "reasoning_tokens": row["reasoning_tokens"]},
              "latency": row["latency"], "ok": bool(row["ok"]),
              "from_cache": None if row["from_cache"] is None else bool(row["from_cache"]),
              "created": row["created"]}
    if not row["ok"]:
        record["error"] = {k: v for k, v in response.items() if k != "text"}
    return record


@command("calls")
@click.option("--run", "run_id", default=None, help="only the calls run R used (its episodes, scores, attributions)")
@click.option("--role", default=None, help="only calls of this role; a glob such as 'memory:*'")
@click.option("--artifact", default=None,
              help="only the calls one artifact used, e.g. 'recon:dump_all:0:default:user_001:<dimension>' "
                   "or 'episode:user_001:3' (a glob)")
@click.option("--failed", is_flag=True, help="only recorded failures")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="at most N calls")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line instead of a table")
@click.option("--embeddings", is_flag=True, help="the cached embedding vectors per model instead (embeddings are "
              "cached apart from calls: a system that only embeds shows no calls)")
@global_options(uses=STORE)
def calls(run_id, role, artifact, failed, limit, as_json, embeddings):
    """Every recorded model call (oldest first), with its prompt and response."""
    if embeddings:
        _show_embeddings(run(_embeddings, current_settings()), as_json)
        return
    rows, prompts = run(_find, current_settings(), run=run_id, role=role, artifact=artifact, failed=failed,
                        limit=limit)
    records = [call_record(r) for r in rows]
    if as_json:
        for record in records:
            click.echo(orjson.dumps({**record, "run_prompts": prompts} if prompts else record).decode())
        return
    if prompts:  # which prompt directory each stage of the run used (tables: "prompts")
        out.print("prompts: " + "; ".join(f"{p['stage']} {p['mode'] or ''} {p['prompts']}".replace("  ", " ")
                                          for p in prompts), highlight=False)
    table = Table("key", "role", "model", "ok", "cache", "tokens", "latency", "last message", "response")
    for r in records:
        messages = r["request"].get("messages") or [{}]
        usage = r["usage"]
        table.add_row(r["key"][:14], r["role"], r["model"], "yes" if r["ok"] else "FAILED",
                      "-" if r["from_cache"] is None else ("hit" if r["from_cache"] else "miss"),
                      f"{usage['prompt_tokens'] + usage['completion_tokens']:,}", f"{r['latency']:.2f} s",
                      _preview(messages[-1].get("content")), _preview(r["response"] or r.get("error", {}).get("error")))
    out.print(table)
    # A memory system that only embeds makes no calls: its vectors are cached apart, by model and text.
    hint = "" if records else " (embeddings are cached apart from calls: `memaudit calls --embeddings` lists them)"
    out.print(f"{len(records)} call(s){hint}", highlight=False)


def _show_embeddings(rows: list[dict], as_json: bool) -> None:
    if as_json:
        for row in rows:
            click.echo(orjson.dumps(row).decode())
        return
    table = Table("embedding model", "vectors", "bytes")
    for row in rows:
        table.add_row(row["model"], f"{row['vectors']:,}", f"{row['bytes']:,}")
    out.print(table)
    out.print(f"{sum(r['vectors'] for r in rows)} cached vector(s)", highlight=False)


async def _embeddings(settings) -> list[dict]:
    from memaudit.store import open_store

    async with open_store(settings.db, create=False) as store:
        return await store.vectors.by_model()


def _preview(text) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= PREVIEW else text[:PREVIEW - 1] + "…"


async def _find(settings, **filters) -> tuple[list[dict], list[dict]]:
    """The calls, and (with --run) which prompts each stage of the run was made with."""
    from memaudit.tables.paper import prompt_rows
    from memaudit.store import open_store, select_runs
    from memaudit.types import DEFAULT_VARIANT

    async with open_store(settings.db, create=False) as store:
        prompts = []
        if filters["run"] is not None:
            (info,) = await select_runs(store, [filters["run"]])  # an unknown run is an error, not an empty list
            prompts = await prompt_rows(store, info, DEFAULT_VARIANT)
        return await store.calls.find(**filters), prompts


COMMANDS = [calls]
