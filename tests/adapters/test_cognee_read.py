"""cognee read back as it ships: `search` is its default, graph-backed search (HYBRID_COMPLETION)
for the context it answers from, so the retrieve mode sees what its graph extraction and its
summaries built, each item with its kind, not its chunks alone."""
from __future__ import annotations

import anyio

from memaudit.adapters.boundary import open_adapter
from memaudit.adapters.base import AdapterContext
from memaudit.types import KIND
from tests.adapters.conftest import EPISODES, adapter_runtime, library_marks, play, script

pytestmark = library_marks("cognee")


def test_retrieve_reads_its_graph_and_summaries(settings, fake, tmp_path):
    async def main():
        async with adapter_runtime("cognee", settings, script(fake)) as (_, rt):
            adapter = open_adapter("cognee", AdapterContext(rt.llm, rt.embedder, scope="run/u1"), tmp_path)
            try:
                await play(adapter, EPISODES[:1])
                found = await adapter.search("knee injury from running", 8)
                kinds = {item.fields[KIND] for item in found}
                assert "chunk" in kinds and kinds & {"entity", "edge", "summary"}, kinds
                assert len(found) <= 8
                assert {item[KIND] for item in adapter.dump()} >= {"chunk", "entity"}
            finally:
                await adapter.close()
    anyio.run(main)
