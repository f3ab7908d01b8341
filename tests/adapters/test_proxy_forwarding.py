"""The recording proxy forwards what the library sent: every sampling parameter (memaudit/llm/
dialects FORWARDED) reaches the model and the cache key as sent, a refused one is dropped, learned
and recorded as the run's `adapted`; a `json_object` request stays `json_object`; logprobs and `n`
choices come back; `/v1/responses` is served, cached and replayed like chat; and a request that
carries none of these keys exactly as it did before the proxy forwarded them (old stores replay)."""
from __future__ import annotations

from dataclasses import replace

import anyio
import httpx
import orjson
from pydantic import BaseModel

from memaudit.llm.dialects import FORWARDED
from memaudit.llm.proxy import recording_proxy
from memaudit.provenance import adapted_roles
from memaudit.runtime import open_runtime
from memaudit.roles import MEMORY
from tests.adapters.conftest import adapter_runtime

ROLE = "memory:somelib"
MESSAGES = [{"role": "system", "content": "You keep notes."}, {"role": "user", "content": "I moved to Munich."}]
# One value of each forwarded parameter, as a library might send it.
SENT = {"top_p": 0.1, "stop": ["\n\n"], "presence_penalty": 0.5, "frequency_penalty": 0.25, "logprobs": True,
        "top_logprobs": 2, "logit_bias": {"1234": -100}, "n": 2, "seed": 42, "response_format": {"type": "json_object"}}
# The key the proxy gave this plain request before it forwarded anything but temperature and
# max_tokens (computed on the earlier code): a store recorded then still replays.
PLAIN = {"model": "whatever", "messages": MESSAGES, "temperature": 0.2, "max_tokens": 300}
PLAIN_KEY = "s1:ece85b2dbe3fb98b0e947c6feb5756b26168c21c37c68a38232791065007f14e"


def post(url: str, body: dict) -> httpx.Response:
    return httpx.post(url, json=body, timeout=30)


async def ask(route, path: str, body: dict) -> httpx.Response:
    with route.calls_from_here():
        return await anyio.to_thread.run_sync(post, route.base_url + path, body)


async def keys_of(rt) -> list[dict]:
    await rt.store.flush()
    return [orjson.loads(r["request"]) for r in await rt.store.fetchall("SELECT request FROM calls ORDER BY rowid")]


def test_every_sampling_parameter_reaches_the_model_and_the_key_as_sent(settings, fake):
    assert set(SENT) == set(FORWARDED)
    fake.on_json_object(lambda body: {"note": "moved to Munich"})

    async def main():
        async with adapter_runtime("nomem", settings, fake) as (_, rt):
            route = (await recording_proxy(rt.llm)).route(ROLE, rt.embedder)
            answer = await ask(route, "/chat/completions", {"model": "x", "messages": MESSAGES, **SENT})
            assert answer.status_code == 200
            sent = fake.requests[-1]
            assert {name: sent.get(name) for name in SENT} == SENT  # json_object stays json_object: no schema
            recorded = (await keys_of(rt))[-1]
            assert recorded["params"] == SENT and recorded["schema"] is None
            choices = answer.json()["choices"]
            assert len(choices) == 2 and orjson.loads(choices[1]["message"]["content"]) == {"note": "moved to Munich"}
            assert len(choices[0]["logprobs"]["content"][0]["top_logprobs"]) == 2
            again = await ask(route, "/chat/completions", {"model": "x", "messages": MESSAGES, **SENT})
            assert again.json()["choices"] == choices and len(fake.requests) == 1  # answered from the cache
            changed = await ask(route, "/chat/completions", {"model": "x", "messages": MESSAGES, **SENT, "seed": 43})
            assert changed.status_code == 200 and len(fake.requests) == 2  # a parameter is part of the key
    anyio.run(main)


def test_a_request_without_them_keys_as_before(settings, fake):
    async def main():
        async with adapter_runtime("nomem", settings, fake) as (_, rt):
            route = (await recording_proxy(rt.llm)).route(ROLE, rt.embedder)
            assert (await ask(route, "/chat/completions", PLAIN)).status_code == 200
            await rt.store.flush()
            [row] = await rt.store.fetchall("SELECT key, request FROM calls")
            assert "params" not in orjson.loads(row["request"]) and row["key"] == PLAIN_KEY
    anyio.run(main)


def test_a_refused_parameter_is_dropped_learned_and_recorded_as_adapted(settings, fake):
    fake.refused = {"logit_bias"}

    async def main():
        async with adapter_runtime("nomem", settings, fake) as (_, rt):
            route = (await recording_proxy(rt.llm)).route(ROLE, rt.embedder)
            body = {"model": "x", "messages": MESSAGES, "top_p": 0.1, "logit_bias": {"50256": -100}}
            assert (await ask(route, "/chat/completions", body)).status_code == 200
            assert "logit_bias" in fake.requests[0] and "logit_bias" not in fake.requests[1]
            assert fake.requests[1]["top_p"] == 0.1
            assert (await keys_of(rt))[-1]["params"] == {"top_p": 0.1}
            rc = rt.llm.role_config(ROLE)
            roles = {MEMORY: {"model": rc.model, "backend": rc.backend, "top_p": None}}
            assert await adapted_roles(roles, rt.llm.refusals) == {MEMORY: ["logit_bias"]}
    anyio.run(main)


class Note(BaseModel):
    fact: str


def test_the_responses_api_is_served_recorded_and_replayed_like_chat(settings, fake):
    """OpenAI's own client (`responses.parse`, as Graphiti's default client calls it) through the
    proxy: its schema is enforced, its answer parsed; replayed from the cache with no server."""
    fake.on("memory_somelib", lambda body: {"fact": "lives in Munich"})

    async def parse(route):
        from openai import AsyncOpenAI

        client = AsyncOpenAI(api_key="unused", base_url=route.base_url, max_retries=0)
        with route.calls_from_here():
            answer = await client.responses.parse(model="gpt-4.1-mini", input=MESSAGES, max_output_tokens=200,
                                                  temperature=0.3, text_format=Note)
        await client.close()
        return answer

    async def main():
        async with adapter_runtime("nomem", settings, fake) as (_, rt):
            route = (await recording_proxy(rt.llm)).route(ROLE, rt.embedder)
            answer = await parse(route)
            assert answer.output_parsed == Note(fact="lives in Munich") and answer.usage.input_tokens > 0
            sent = fake.requests[-1]
            assert sent["messages"] == MESSAGES and sent["temperature"] == 0.3
            assert 200 in (sent.get("max_tokens"), sent.get("max_completion_tokens"))
            assert sent["response_format"]["json_schema"]["schema"]["properties"] == {
                "fact": {"title": "Fact", "type": "string"}}
        async with open_runtime(replace(settings, cache="replay"), transport=httpx.MockTransport(unreachable),
                                embedder=rt.embedder) as replayed:
            again = await parse((await recording_proxy(replayed.llm)).route(ROLE, replayed.embedder))
            assert again.output_parsed == answer.output_parsed
    anyio.run(main)


def unreachable(request):
    raise AssertionError(f"replay contacted {request.url}")
