"""Looking after the call cache: per-role statistics, and merging caches made elsewhere.

A large run is split across machines by `--users` ranges; each machine fills its own store, and
`merge_caches` joins their calls and embedding vectors back into one store. Rows are
content-addressed, so the union is well defined and merging the same source twice changes nothing.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from memaudit.errors import BadInput

CALL_COLUMNS = ("key, role, model, request, response, ok, prompt_tokens, completion_tokens, cached_tokens, "
                "latency, created, reasoning_tokens")


async def cache_stats(store) -> list[dict]:
    """One row per role: calls stored (ok and failed), bytes they take, tokens, and how often
    artifacts used a call from the cache (hits) or made it fresh (misses)."""
    await store.flush()
    stored = await store.fetchall(
        "SELECT role, COUNT(*) AS stored, SUM(ok) AS ok, "
        "SUM(LENGTH(CAST(request AS BLOB)) + LENGTH(CAST(response AS BLOB))) AS bytes, "
        "SUM(prompt_tokens) AS prompt_tokens, SUM(completion_tokens) AS completion_tokens "
        "FROM calls GROUP BY role")
    used = await store.fetchall(
        "SELECT role, SUM(from_cache) AS hits, SUM(1 - from_cache) AS misses FROM call_uses GROUP BY role")
    rows: dict[str, dict] = {}
    for r in stored:
        rows[r["role"]] = {"role": r["role"], "stored": r["stored"], "failed": r["stored"] - (r["ok"] or 0),
                           "bytes": r["bytes"] or 0, "prompt_tokens": r["prompt_tokens"] or 0,
                           "completion_tokens": r["completion_tokens"] or 0, "hits": 0, "misses": 0}
    for r in used:
        row = rows.setdefault(r["role"], {"role": r["role"], "stored": 0, "failed": 0, "bytes": 0,
                                          "prompt_tokens": 0, "completion_tokens": 0})
        row["hits"], row["misses"] = r["hits"] or 0, r["misses"] or 0
    return [rows[name] for name in sorted(rows)]


async def merge_caches(store, sources: list[Path]) -> list[dict]:
    """Add every source store's calls and embeddings to `store`, in one transaction per source.
    A stored answer is never replaced, except a recorded failure by a successful answer."""
    await store.flush()
    target = Path(store.path).resolve()
    report = []
    for source in sources:
        source = Path(source)
        if not source.is_file():
            raise BadInput("no such store to merge", file=str(source))
        if source.resolve() == target:
            raise BadInput("cannot merge a store into itself", file=str(source))
        _check_source(source)
        await (await type(store).open(source)).close()  # brings a store made by an older version up to date
        before = await _counts(store)
        await store.conn.execute("ATTACH DATABASE ? AS src", (str(source),))
        try:
            await store.write([
                (f"INSERT INTO calls({CALL_COLUMNS}) SELECT {CALL_COLUMNS} FROM src.calls WHERE true "
                 "ON CONFLICT(key) DO UPDATE SET response=excluded.response, ok=excluded.ok, "
                 "prompt_tokens=excluded.prompt_tokens, completion_tokens=excluded.completion_tokens, "
                 "cached_tokens=excluded.cached_tokens, latency=excluded.latency, created=excluded.created, "
                 "reasoning_tokens=excluded.reasoning_tokens "
                 "WHERE calls.ok = 0 AND excluded.ok = 1", ()),
                ("INSERT OR IGNORE INTO embeddings(model, text_hash, vector) "
                 "SELECT model, text_hash, vector FROM src.embeddings", ()),
                ("INSERT OR IGNORE INTO param_refusals(model, backend, param) "
                 "SELECT model, backend, param FROM src.param_refusals", ()),
            ])
        finally:
            await store.conn.execute("DETACH DATABASE src")
        after = await _counts(store)
        report.append({"source": str(source), "calls_added": after[0] - before[0],
                       "failures_replaced": before[1] - after[1], "embeddings_added": after[2] - before[2]})
    return report


def _check_source(source: Path) -> None:
    try:
        with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise BadInput(f"not a memaudit store: {exc}", file=str(source)) from None
    missing = {"calls", "embeddings"} - tables
    if missing:
        raise BadInput(f"not a memaudit store (no {', '.join(sorted(missing))} table)", file=str(source))


async def _counts(store) -> tuple[int, int, int]:
    row = await store.fetchone("SELECT (SELECT COUNT(*) FROM calls), (SELECT COUNT(*) FROM calls WHERE ok=0), "
                               "(SELECT COUNT(*) FROM embeddings)")
    return row[0], row[1], row[2]
