"""Embeddings from an OpenAI-compatible `/v1/embeddings` endpoint go through the model client's
transport: its retries and error classification, the request and answer as the dialects state
them; vectors come back in input order, normalised, cached by (model, text hash); under
`--cache replay` the endpoint is never contacted."""
from __future__ import annotations

import anyio
import numpy as np
import pytest

from memaudit.errors import CacheMiss, EndpointError
from memaudit.llm.dialects import parse_embeddings
from memaudit.llm.embed import Embedder, endpoint_encoder
from memaudit.llm.transport import Transport
from memaudit.store import open_store
from memaudit.testing.fake_openai import FakeOpenAI, embedding

URL = "http://embed.test/v1"


def transport(fake: FakeOpenAI) -> Transport:
    return Transport(concurrency=4, max_retries=3, backoff_base=0.0, mock=fake.transport())


def expected(model: str, texts: list[str]) -> np.ndarray:
    vectors = np.asarray([embedding(model, t) for t in texts], dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_vectors_in_input_order_normalised_and_cached_by_model_and_text(tmp_path):
    fake = FakeOpenAI()
    fake.api_key = "sk-embed"

    async def main():
        async with open_store(tmp_path / "v.db") as store:
            shared = transport(fake)
            embedder = Embedder(store.vectors, encoder=endpoint_encoder(shared, URL, "e5", "sk-embed"), model_name="e5")
            vectors = await embedder.embed(["tea", "a knee injury", "tea"])
            assert np.allclose(vectors, expected("e5", ["tea", "a knee injury", "tea"]), atol=1e-6)
            assert fake.embedding_requests == [{"model": "e5", "input": ["tea", "a knee injury"]}]
            await store.flush()
            again = Embedder(store.vectors, encoder=endpoint_encoder(shared, URL, "e5", "sk-embed", replay=True),
                             model_name="e5")
            assert np.array_equal(await again.embed(["a knee injury"]), vectors[1:2])  # from the store
            await shared.aclose()
    anyio.run(main)
    assert len(fake.embedding_requests) == 1


def test_retryable_statuses_are_retried_by_the_shared_loop_and_others_end_the_command():
    fake = FakeOpenAI()

    async def main():
        shared = transport(fake)
        fake.faults = [503, 429]
        vectors = await endpoint_encoder(shared, URL, "e5")(["tea"])
        assert shared.retries == 2 and np.allclose(vectors, expected("e5", ["tea"]), atol=1e-6)
        fake.api_key = "sk-right"
        with pytest.raises(EndpointError, match="error 401: Incorrect API key") as refused:
            await endpoint_encoder(shared, URL, "e5", "sk-wrong")(["tea"])
        assert "sk-wrong" not in str(refused.value) and shared.retries == 2  # not retried, key scrubbed
        fake.api_key = None
        fake.faults = ["garbage"]
        with pytest.raises(EndpointError, match="did not answer one vector per text for model 'e5'"):
            await endpoint_encoder(shared, URL, "e5")(["tea", "coffee"])
    anyio.run(main)


def test_replay_never_contacts_the_endpoint():
    fake = FakeOpenAI()

    async def main():
        with pytest.raises(CacheMiss, match="cache miss for role embeddings.*never contacts the embedding endpoint"):
            await Embedder(None, encoder=endpoint_encoder(transport(fake), URL, "e5", replay=True),
                           model_name="e5").embed(["tea"])
    anyio.run(main)
    assert fake.embedding_requests == []


@pytest.mark.parametrize("answer", [
    None, {"data": "x"}, {"data": [{"index": 0, "embedding": [1.0]}]},  # one vector for two texts
    {"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]},  # an index twice
    {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]},  # two lengths
    {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": ["a"]}]},
    {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [True]}]},
])
def test_an_answer_that_is_not_one_vector_per_text_is_refused(answer):
    assert parse_embeddings(answer, 2) is None


def test_rows_are_put_back_in_input_order():
    answer = {"data": [{"index": 1, "embedding": [3, 4]}, {"index": 0, "embedding": [1.5, 2]}]}
    assert parse_embeddings(answer, 2) == [[1.5, 2], [3, 4]]
