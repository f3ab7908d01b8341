"""Looking after the call cache: per-role statistics, and merging caches made elsewhere.

A large run is split across machines by `--users` ranges; each machine fills its own store, and
`merge_caches` joins their calls and embedding vectors back into one store. Rows are
content-addressed, so the union is well defined and merging the same source twice changes nothing.
"""
from __future__ import annotations

from pathlib import Path

from memaudit.errors import BadInput
from memaudit.store.calls import store_tables


async def cache_stats(store) -> list[dict]:
    """One row per role: calls stored (ok and failed), bytes they take, tokens, and how often
    artifacts used a call from the cache (hits) or made it fresh (misses)."""
    await store.flush()
    stored = await store.calls.stored_by_role()
    used = await store.calls.uses_by_role()
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
        before = await store.calls.counts()
        await store.calls.merge_from(source)
        after = await store.calls.counts()
        report.append({"source": str(source), "calls_added": after[0] - before[0],
                       "failures_replaced": before[1] - after[1], "embeddings_added": after[2] - before[2]})
    return report


def _check_source(source: Path) -> None:
    missing = {"calls", "embeddings"} - store_tables(source)  # a file that is no store: StoreError
    if missing:
        raise BadInput(f"not a memaudit store (no {', '.join(sorted(missing))} table)", file=str(source))
