"""A finished rollout of the bundled sample, for the scoring performance scripts to score as CLI processes.

The rollout runs through the library against the loopback fake; memory items and the retrieval
queries of every bank entry are embedded by a fast stand-in encoder and cached in the store, so
the timed `memaudit score` processes read every vector from the store and never load MiniLM: they
measure the harness, not the sentence encoder."""
from __future__ import annotations

import hashlib
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np

from memaudit.bench.instances import resolve_bench
from memaudit.config import load_settings
from memaudit.llm.embed import DIM, Embedder
from memaudit.roles import SIMULATOR
from memaudit.rollout.runner import run_rollout
from memaudit.runtime import open_runtime
from memaudit.scoring.recovery import retrieval_query
from memaudit.testing.fake_openai import FakeOpenAI
from memaudit.testing.http_server import serve

USERS, TASKS = 3, 31


def fast_encoder(texts: list[str]) -> np.ndarray:
    rows = []
    for text in texts:
        v = np.frombuffer(hashlib.sha256(text.encode()).digest() * (DIM * 4 // 32), dtype=np.uint8)[:DIM]
        v = v.astype(np.float32) - 127.5
        rows.append(v / np.linalg.norm(v))
    return np.stack(rows)


def second_turn_satisfies(body: dict) -> dict:
    """The simulated user is satisfied once the conversation holds two assistant replies."""
    conversation = body["messages"][-1]["content"]
    done = conversation.count("Assistant: ") >= 2
    return {"feedback_type": "satisfied" if done else "followup", "text": "ok" if done else "more detail please"}


def fake_model() -> FakeOpenAI:
    fake = FakeOpenAI().on(SIMULATOR, second_turn_satisfies)
    return fake.on_text(lambda body: f"A plan written after reading {len(body['messages'])} messages.")


async def prepare(db: Path, systems=("longctx_full",)) -> None:
    """Roll out `systems` on the first USERS users x TASKS tasks of the sample into `db`."""
    with serve(fake_model()) as url:
        settings = replace(load_settings(db=db, base_url=url, model="fake", backend="openai", env={}),
                           concurrency=64)
        async with open_runtime(settings) as rt:
            rt.embedder = Embedder(rt.store.vectors, encoder=fast_encoder)
            bench = await resolve_bench(rt.store, "sample")
            users = bench.users[:USERS]
            await run_rollout(rt, bench, list(systems), users=[u.id for u in users], tasks=TASKS, max_turns=2,
                              progress=False)
            await rt.embedder.embed([retrieval_query(e.category, e.dimension) for u in users for e in u.bank])
            await rt.store.flush()


def fresh_copy(prepared: Path, to: Path) -> Path:
    """A copy of the prepared store (checkpointed: a plain file copy is the whole store)."""
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(prepared, to)
    return to
