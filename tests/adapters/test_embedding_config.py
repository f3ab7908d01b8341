"""The memory systems' embedder is configurable globally and per role group, recorded in every
snapshot, and a store is never searched with another model than the one it was built with."""
from __future__ import annotations

import anyio
import pytest

from memaudit.adapters.base import AdapterContext
from memaudit.adapters.registry import get_adapter
from memaudit.config import load_settings
from memaudit.errors import BadInput
from memaudit.llm.embed import MODEL_NAME, Embedder, configured_embedder
from memaudit.llm.transport import Transport
from tests.adapters.conftest import adapter_runtime, hash_encoder, play, script


def test_roles_configure_their_own_embedding_model(tmp_path):
    config = tmp_path / "roles.toml"
    config.write_text('[roles.memt_policy]\nembed_model = "BAAI/bge-m3"\nembed_base_url = "http://gpu:8001/v1"\n')
    settings = load_settings(config=config, env={})
    embedder = configured_embedder(None, settings, Transport(concurrency=1))  # never opened: nothing is embedded
    assert embedder.model_name == MODEL_NAME  # the bundled default, for every other system
    assert embedder.for_role("memory") is embedder
    assert embedder.for_role("memt_policy").model_name == "BAAI/bge-m3"
    assert settings.embedding("memt_policy") == ("BAAI/bge-m3", "http://gpu:8001/v1", None)
    flagged = load_settings(embed_model="intfloat/e5-small-v2", env={})
    assert configured_embedder(None, flagged, Transport(concurrency=1)).model_name == "intfloat/e5-small-v2"


def test_snapshot_records_the_model_and_restore_refuses_another(settings, fake):
    async def main():
        async with adapter_runtime("mem0", settings, script(fake)) as (make, rt):
            adapter = make()
            await play(adapter)
            state = adapter.snapshot()
            assert state["embed_model"] == MODEL_NAME and state["write_failures"] == 0
            other = get_adapter("mem0")(AdapterContext(rt.llm, Embedder(None, encoder=hash_encoder,
                                                                        model_name="BAAI/bge-m3"), scope="run/u1"))
            with pytest.raises(BadInput, match="embedding model 'all-MiniLM-L6-v2'"):
                await other.restore(state)
    anyio.run(main)


@pytest.mark.parametrize("system", ["nomem", "longctx_full", "simple_rag", "bm25", "file_memory", "amem", "mem0",
                                    "memt"])
def test_every_snapshot_carries_the_write_failure_count_of_a_system_that_writes_with_a_model(system, settings, fake):
    """A system that never calls a model to write (`memory_calls = False`) keeps no count: its
    tables say n/a where a system that could lose a write says 0."""
    async def main():
        async with adapter_runtime(system, settings, script(fake)) as (make, rt):
            adapter = make()
            state = adapter.snapshot()
            assert "embed_model" in state
            if adapter.memory_calls:
                assert state["write_failures"] == adapter.write_failures == 0
            else:
                assert "write_failures" not in state and system in ("nomem", "longctx_full", "simple_rag", "bm25")
    anyio.run(main)
