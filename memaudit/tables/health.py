"""The memory health of each run (issue 44): did the memory system do its work at all? Per run, from
what the rollout and scoring recorded (no model call): how many model calls it made per user message
(new ones and those the call cache answered, apart), what its final stores hold by item kind,
whether its long-term store was ever written (a system with a short-term queue, such as llamaindex's
chat queue, may end a run holding nothing else), how many recovery reads found nothing, and what it
lost: writes to model failures, texts cut to fit its embedding model.

A user message is one the memory was given to store: the task (the user's first message) and every
user reply (store/episodes.py `op_counts`). An item's kind is its dump's `kind` key (issue 41); an
item without one counts as `unlabelled`."""
from __future__ import annotations

from collections import Counter

from memaudit.store import Store
from memaudit.tables import metrics
from memaudit.tables.columns import EMBED_TRUNCATED, OUTPUTS, RUN, SYSTEM, USERS, WRITE_FAILURES, Column
from memaudit.types import KIND, MODES, SHORT_TERM_KINDS, UNLABELLED

HEALTH = (
    RUN,
    SYSTEM,
    USERS,
    Column("user messages", ("messages",),
           doc="the user messages the memory was given to store (each task counts as its user's first message)"),
    Column("memory calls/message new/cached", ("calls_per_message", "cached_per_message"), digits=2,
           extra=("memory_calls", "memory_calls_cached"), measured=True,
           doc="the memory system's model calls per user message, those sent to the model / those the call cache "
               "answered (a request the system repeated); json also carries both totals"),
    Column("items by kind", ("items_by_kind",), "kinds", outputs=OUTPUTS - {"csv"},
           doc="the items of every user's final memory by kind (`unlabelled`: an item that names no kind)"),
    Column("long-term written", ("long_term_written",), "yesno",
           doc="whether any user's final memory holds an item of its long-term store, i.e. one the system does not "
               "keep only in a short-term queue; n/a for a system that keeps nothing"),
    *(Column(f"empty reads {label}", (f"empty_{mode}", f"reads_{mode}"),
             doc=f"the recovery reads ({label}, as Table 2 scores them) that returned nothing / all of them")
      for mode, label in zip(MODES, ("full-store", "top-k"))),
    WRITE_FAILURES,
    EMBED_TRUNCATED,
)


def per_message(count, messages) -> float | None:
    return count / messages if count is not None and messages else None


async def final_memory(store: Store, run: str, users) -> dict:
    """Over the users' final snapshots: items by kind and the short-term kinds their system declared."""
    kinds: Counter = Counter()
    short_term: set[str] = set()
    snapshots = 0
    for user in users:
        snapshot = await store.episodes.last_snapshot(run, user)
        if snapshot is None:
            continue
        snapshots += 1
        state = snapshot["state"] if isinstance(snapshot["state"], dict) else {}
        kinds.update(item.get(KIND) or UNLABELLED for item in snapshot["items"])
        short_term.update(state.get(SHORT_TERM_KINDS, ()))
    return {"snapshots": snapshots, "kinds": dict(sorted(kinds.items())), "short_term": short_term}


def long_term_written(memory: dict, write_failures) -> bool | None:
    """Whether a final store holds an item outside the short-term kinds; None for no snapshot, or a
    system that keeps nothing and writes without a model (nomem)."""
    if not memory["snapshots"] or (not memory["kinds"] and write_failures is None):
        return None
    return any(kind not in memory["short_term"] for kind in memory["kinds"])


async def empty_reads(store: Store, run: str, variant: str, headline_k: dict) -> dict:
    """Per mode at the k Table 2 reports (`headline_k`: mode -> k, absent when not scored): the
    reads that returned nothing and all reads; None where the rows record no evidence (imported)."""
    found = {(r["mode"], r["k"]): r for r in await store.scores.empty_reads(run, variant)}
    out = {}
    for mode in MODES:
        row = found.get((mode, headline_k.get(mode)))
        known = row is not None and row["unrecorded"] < row["reads"]
        out[f"empty_{mode}"] = row["empty"] if known else None
        out[f"reads_{mode}"] = row["reads"] if row is not None else None
    return out


async def health_row(store: Store, d, variant: str) -> dict:
    """The health of one run (`d`: memaudit/tables/paper.py RunData) in its scores of `variant`."""
    ops = (d.memory_side.ops if d.memory_side else None) or {}
    lost = metrics.total_write_failures(u.memory_write_failures for u in d.users.values())
    memory = await final_memory(store, d.run, d.users)
    messages, calls, cached = ops.get("messages"), ops.get("calls"), ops.get("cached")
    new = None if calls is None else calls - (cached or 0)
    headline_k = {mode: rec.k for mode in MODES if (rec := d.headline(mode)) is not None}
    return {"run": d.run, "system": d.system, "users": len(d.users), "messages": messages,
            "calls_per_message": per_message(new, messages), "cached_per_message": per_message(cached, messages),
            "memory_calls": new, "memory_calls_cached": cached, "items_by_kind": memory["kinds"],
            "long_term_written": long_term_written(memory, lost),
            **await empty_reads(store, d.run, variant, headline_k),
            "memory_write_failures": lost,
            "embed_truncated": metrics.total_write_failures(u.embed_truncated for u in d.users.values())}
