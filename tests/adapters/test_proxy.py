"""The recording proxy over real loopback HTTP: a chat completion is forwarded through memaudit's
client under the route's role (cached: asked twice, the model sees it once), a model failure
answers 400 and is kept on the route, embeddings come from the route's embedder as floats or
base64, and an endpoint embedder reads them back."""
from __future__ import annotations

import base64

import anyio
import httpx
import numpy as np

from memaudit.errors import InvalidOutput
from memaudit.llm.embed import Embedder, endpoint_encoder
from memaudit.llm.transport import Transport
from memaudit.llm.proxy import recording_proxy
from tests.adapters.conftest import adapter_runtime, hash_encoder


def post(url: str, body: dict) -> httpx.Response:
    return httpx.post(url, json=body, timeout=30)


def test_chat_is_forwarded_cached_and_attributed(settings, fake):
    fake.on_text(lambda body: "forwarded answer")

    async def main():
        async with adapter_runtime("nomem", settings, fake) as (make, rt):
            route = (await recording_proxy(rt.llm)).route("memory:somelib", rt.embedder)
            body = {"model": "whatever", "messages": [{"role": "user", "content": "hello"}], "temperature": 0}
            with rt.llm.collect() as uses, route.calls_from_here():
                first = await anyio.to_thread.run_sync(post, route.base_url + "/chat/completions", body)
            second = await anyio.to_thread.run_sync(post, route.base_url + "/chat/completions", body)
            assert first.status_code == second.status_code == 200
            assert first.json()["choices"][0]["message"]["content"] == "forwarded answer"
            assert len(fake.requests) == 1 and rt.llm.stats["memory:somelib"].cache_hits == 1
            assert [(role, cached) for role, _, cached in uses] == [("memory:somelib", False)]

            fake.faults = ["garbage"] * (settings.repair_attempts + 1)
            schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                      "additionalProperties": False}
            bad = {**body, "messages": [{"role": "user", "content": "json please"}],
                   "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
            with route.calls_from_here():
                failed = await anyio.to_thread.run_sync(post, route.base_url + "/chat/completions", bad)
            assert failed.status_code == 400 and isinstance(route.error, InvalidOutput)
            streamed = {**body, "stream": True}
            refused = await anyio.to_thread.run_sync(post, route.base_url + "/chat/completions", streamed)
            assert refused.status_code == 400
    anyio.run(main)


def test_embeddings_as_floats_and_base64_and_an_endpoint_embedder_reads_them(settings, fake):
    async def main():
        async with adapter_runtime("nomem", settings, fake) as (make, rt):
            route = (await recording_proxy(rt.llm)).route("memory:somelib", Embedder(None, encoder=hash_encoder))
            expected = hash_encoder(["a knee injury", "tea"])
            floats = await anyio.to_thread.run_sync(post, route.base_url + "/embeddings",
                                                    {"model": "m", "input": ["a knee injury", "tea"]})
            assert np.allclose([row["embedding"] for row in floats.json()["data"]], expected)
            packed = await anyio.to_thread.run_sync(post, route.base_url + "/embeddings",
                                                    {"model": "m", "input": "tea", "encoding_format": "base64"})
            vector = np.frombuffer(base64.b64decode(packed.json()["data"][0]["embedding"]), dtype="<f4")
            assert np.allclose(vector, expected[1])
            transport = Transport(concurrency=2)  # real HTTP to the proxy
            try:
                remote = Embedder(None, encoder=endpoint_encoder(transport, route.base_url, "m"), model_name="m")
                assert np.allclose(await remote.embed(["a knee injury", "tea"]), expected, atol=1e-6)
            finally:
                await transport.aclose()
    anyio.run(main)
