"""Agno's MemoryManager on its SqliteDb through the recording proxy."""
from __future__ import annotations

import anyio

from tests.adapters.conftest import EPISODES, adapter_runtime, needs_library, play, script

pytestmark = needs_library("agno")
ROLE = "memory:agno"


def test_memories_grow(settings, fake):
    from memaudit.adapters.agno import AgnoMemory
    fake = script(fake)
    fake.tool_chooser = AgnoMemory.fake_tool_calls
    fake.on("memory_agno", AgnoMemory.fake_answer)

    async def main():
        async with adapter_runtime("agno", settings, fake) as (make, rt):
            adapter = make()
            await play(adapter, EPISODES[:1])
            print(rt.llm.stats[ROLE])
            for item in adapter.dump():
                print(item)
            print(await adapter.search("knee", 3))
            print(adapter.failures.entries, adapter.route.error)
            restored = make()
            await restored.restore(adapter.snapshot())
            assert restored.dump() == adapter.dump()
    anyio.run(main)
