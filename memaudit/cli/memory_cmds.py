"""Commands: `memory search` — audit a dumped memory store with the system's own search.

The store is a published `memories.json` (`{"num_memories": N, "memories": [...]}`) or a plain
list of items; queries are JSONL lines `{"id": …, "query": "…"}`. Each output line is
`{"id": …, "results": [{"content", "score", …native fields}]}`."""
from __future__ import annotations

from pathlib import Path

import click
import orjson

from memaudit.adapters.base import AdapterContext
from memaudit.adapters.boundary import open_adapter
from memaudit.adapters.registry import available, get_adapter
from memaudit.cli.common import MEMORY, MODEL, STORE, Group, current_settings, global_options, run
from memaudit.bench.files import read_json
from memaudit.errors import BadInput
from memaudit.runtime import open_runtime
from memaudit.userfiles import read_regular

MAX_QUERIES_BYTES = 256 * 1024 * 1024  # a queries file: one short JSON line per query


def read_store(path: Path) -> list[dict]:
    data = read_json(path, str(path))
    if isinstance(data, dict) and isinstance(data.get("memories"), list):
        return data["memories"]
    if isinstance(data, list):
        return data
    raise BadInput("expected {\"memories\": [...]} or a list of memories", file=str(path), field="memories")


def read_queries(path: Path) -> list[dict]:
    try:
        lines = read_regular(path, limit=MAX_QUERIES_BYTES).decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 text (byte {exc.start})", file=str(path)) from None
    queries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            query = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise BadInput(f"line {number}: not valid JSON", file=str(path)) from None
        if not isinstance(query, dict) or "id" not in query or not isinstance(query.get("query"), str):
            raise BadInput(f"line {number}: expected {{\"id\": …, \"query\": \"…\"}}", file=str(path))
        queries.append(query)
    return queries


async def search_store(settings, system: str, memories: list[dict], queries: list[dict], k: int) -> list[dict]:
    # Only memt's search calls a model (its ReAct policy); the runtime starts a server on first use.
    async with open_runtime(settings) as rt:
        adapter = open_adapter(system, AdapterContext(rt.llm, rt.embedder, scope=f"search/{system}"),
                               rt.settings.db.parent)
        await adapter.load_items(memories)
        return [{"id": q["id"], "results": [item.to_json() for item in await adapter.search(q["query"], k)]}
                for q in queries]


@click.group("memory", cls=Group)
def memory():
    """Work with dumped memory stores."""


@memory.command("search")
@click.option("--system", required=True, help=f"memory system ({', '.join(available())})")
@click.option("--store", "store_path", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="memories.json (published layout) or a JSON list of items")
@click.option("--queries", "queries_path", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="JSONL, one {\"id\", \"query\"} per line")
@click.option("--k", default=5, show_default=True, type=click.IntRange(1, 100_000), help="results per query")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None, help="write JSONL here")
@global_options(uses=STORE + MODEL + MEMORY)
def search(system, store_path, queries_path, k, out):
    """Load a dumped store into SYSTEM and run its search for every query."""
    get_adapter(system)  # an unknown system fails before anything is read
    memories, queries = read_store(store_path), read_queries(queries_path)
    results = run(search_store, current_settings(), system, memories, queries, k)
    text = "".join(orjson.dumps(r).decode() + "\n" for r in results)
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text)


COMMANDS = [memory]
