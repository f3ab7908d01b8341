"""A recorded run for the scoring tests: a real rollout on the fake server with the fake encoder,
its vectors kept in the store (so replay can read them back instead of loading a model)."""
from __future__ import annotations

from contextlib import asynccontextmanager

from memaudit.llm.embed import Embedder
from memaudit.rollout.runner import run_rollout
from memaudit.runtime import open_runtime
from memaudit.testing.http_server import rate_every_preference
from tests.rollout.conftest import fake_encoder, make_bench

LONG_REPLY = ("Here is a detailed plan that walks through every step of what you asked for, with options, "
              "costs, timing and the trade-offs between them, so you can pick what suits you best. ") * 2


def script(fake):
    """Valid answers for the rollout roles; the scoring roles keep the schema-driven defaults."""
    fake.on("pref_judge", rate_every_preference)
    fake.on_text(lambda body: LONG_REPLY)
    return fake


@asynccontextmanager
async def runtime(settings, fake):
    async with open_runtime(settings, transport=fake.transport()) as rt:
        rt.embedder = Embedder(rt.store.vectors, encoder=fake_encoder)
        yield rt


async def record(rt, systems=("longctx_full", "nomem"), *, users=2, tasks=3, max_turns=2):
    bench = make_bench(n_users=users, n_tasks=tasks)
    await rt.store.benchmarks.save(bench, replace=True)
    return await run_rollout(rt, bench, list(systems), max_turns=max_turns, progress=False)


def requests_for(fake, role: str) -> list[dict]:
    return [b for b in fake.requests
            if (b.get("response_format") or {}).get("json_schema", {}).get("name") == role]
