"""file_memory: one rewrite per episode, MEMORY.md always in context, sections and history
entries searchable and dumped."""
from __future__ import annotations

import anyio

from memaudit.adapters.file_memory import sections
from tests.adapters.conftest import EPISODES, adapter_runtime, play

MEMORY = "## Health\n- Hurt a knee running.\n\n## Work\n- Nurse on night shifts.\n- Uses Python for data analysis."


def rewrite(body):
    date = body["messages"][-1]["content"].split("Conversation of ", 1)[1].split(":", 1)[0]
    return {"memory_md": MEMORY, "history_entry": f"Talked about episode {date}."}


def test_rewrite_per_episode_and_context(settings, fake):
    fake.on("memory_file_rewrite", rewrite)

    async def main():
        async with adapter_runtime("file_memory", settings, fake) as (make, rt):
            memory = make()
            await play(memory, EPISODES[:2])
            assert len(fake.requests) == 2  # one call per episode, nothing per message
            assert "User (task): " + EPISODES[1][0] in fake.requests[1]["messages"][-1]["content"]
            assert (await memory.context("anything", 5)).preamble == MEMORY
            dump = memory.dump()
            assert [(i["id"], i["category"]) for i in dump] == [
                ("memory.0", "memory_md"), ("memory.1", "memory_md"), ("history.0", "history_md"),
                ("history.1", "history_md")]
            assert dump[2]["content"] == "[task001] Talked about episode task001."
            found = await memory.search("night shifts nurse work", 2)
            assert found[0].id == "memory.1"
            reloaded = make()
            await reloaded.load_items(dump)
            assert reloaded.dump() == dump
    anyio.run(main)


def test_sections_split_at_headings():
    assert sections("intro\n# A\n- a\n## B\n- b") == ["intro", "# A\n- a", "## B\n- b"]
    assert sections("# Only\n") == ["# Only"]
    assert sections("") == []
