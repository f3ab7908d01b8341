"""The real embedded server (llama.cpp + SmolLM2-135M): structured calls through the client,
then the same calls replayed from the cache with the server stopped."""
from __future__ import annotations

import time
from dataclasses import replace

import anyio
import pytest

from memaudit.config import EMBEDDED_MODEL, load_settings
from memaudit.llm.client import LLM
from memaudit.store import open_store

pytestmark = pytest.mark.integration

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                           "reason": {"type": "string", "maxLength": 80}},
          "required": ["city", "reason"], "additionalProperties": False}
PERSONA = ("You are a travel helper. The traveller lives in Ohio, likes quiet places, dislikes long "
           "drives and travels with a small dog. ") * 4  # a shared prefix the server can reuse


def questions() -> list[list[dict]]:
    return [[{"role": "system", "content": PERSONA},
             {"role": "user", "content": f"Suggest one city for a weekend trip in month {m}. Answer in JSON."}]
            for m in (3, 6, 9)]


async def ask_all(llm: LLM) -> tuple[list, list[float]]:
    answers, took = [], []
    for i, messages in enumerate(questions()):
        start = time.perf_counter()
        result = await llm.call("agent", messages, schema=SCHEMA, max_tokens=60, seed_parts=(i,))
        took.append(time.perf_counter() - start)
        answers.append((result.key, result.text, result.data, result.cached))
    return answers, took


def test_structured_calls_then_replay_without_the_server(tmp_path):
    pytest.importorskip("llama_cpp.server")
    from memaudit.llm.server import embedded_server
    db = tmp_path / "embedded.db"

    async def record():
        async with embedded_server(threads=2, log_path=tmp_path / "server.log") as server:
            settings = load_settings(db=db, base_url=server.url, model=EMBEDDED_MODEL, backend="llamacpp", env={})
            async with open_store(db) as store:
                llm = LLM(settings, store.calls)
                answers, took = await ask_all(llm)
                await llm.aclose()
                return answers, took, settings
    answers, took, settings = anyio.run(record)
    for key, text, data, cached in answers:
        assert not cached and set(data) == {"city", "reason"} and key.startswith("s1:")
    print(f"\nembedded SmolLM2-135M, 2 threads: call latencies {', '.join(f'{t:.2f}' for t in took)} s")

    async def replay():
        async with open_store(db) as store:
            llm = LLM(replace(settings, cache="replay"), store.calls)  # the server is gone: any request would fail
            answers, _ = await ask_all(llm)
            await llm.aclose()
            return answers
    replayed = anyio.run(replay)
    assert [a[:3] for a in replayed] == [a[:3] for a in answers]
    assert all(a[3] for a in replayed)
