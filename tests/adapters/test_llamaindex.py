"""LlamaIndex's Memory through the recording proxy: its short-term queue flushes into the fact and
vector blocks, whose model and embedding calls go through memaudit's client under
`memory:llamaindex`; it sees the user's messages only; an answer the fact block cannot parse is a
counted write failure, never a silently empty memory."""
from __future__ import annotations

import anyio

from tests.adapters.conftest import adapter_runtime, library_marks, script

pytestmark = library_marks("llamaindex")

# Long enough that the short-term queue (800 tokens) flushes into the blocks.
LONG = [(f"Day {n}: I trained for the marathon again, " + "slow miles along the river and hills " * 25,
         [("A reply the memory never sees.", f"Noted for day {n}. " + "My knee held up fine today. " * 20)])
        for n in range(1, 4)]


def fact_calls(fake) -> list[dict]:
    return [b for b in fake.requests if "<existing_facts>" in str(b["messages"][-1].get("content"))]


def test_the_blocks_fill_from_flushed_user_messages_through_the_proxy(settings, fake):
    from memaudit.testing.adapter_contract import play

    async def main():
        async with adapter_runtime("llamaindex", settings, script(fake)) as (make, rt):
            adapter = make()
            await play(adapter, LONG)
            calls = fact_calls(fake)
            assert calls and rt.llm.stats["memory:llamaindex"].calls == len(calls)
            assert not any("A reply the memory never sees" in str(b["messages"]) for b in calls)
            dump = adapter.dump()
            kinds = {item["category"] for item in dump}
            assert kinds == {"extracted_info", "vector_memory", "short_term"}
            # Its retrieval is what Memory retrieves: facts beside the vector block's nodes, best first.
            found = await adapter.search("marathon training", 5)
            assert 0 < len(found) <= 5 and [f.score for f in found] == sorted((f.score for f in found), reverse=True)
            assert {f.fields["category"] for f in found} == {"extracted_info", "vector_memory"}
            assert any("<message role='user'>" in f.content for f in found)
            # Its context is Memory.aget's: the blocks' text in the system message, and the queue.
            context = await adapter.context("marathon training", 2)
            [system, *queue] = await adapter.instance.aget(input="marathon training")
            assert context.preamble == system.content and not context.notes
            assert all(fact in context.preamble for fact in adapter._block("extracted_info").facts)
            assert context.history == [{"role": m.role.value, "content": m.content} for m in queue]
            assert adapter.write_failures == 0
    anyio.run(main)


def test_an_answer_without_facts_is_a_counted_write_failure(settings, fake):
    from memaudit.testing.adapter_contract import play

    async def main():
        async with adapter_runtime("llamaindex", settings, script(fake).on_text(lambda body: "Sure!")) as (make, _):
            adapter = make()
            await play(adapter, LONG)
            assert adapter.write_failures == len(fact_calls(fake)) > 0
            assert {e["error"] for e in adapter.snapshot()["failure_log"]} == {"InvalidOutput"}
            assert not [item for item in adapter.dump() if item["category"] == "extracted_info"]
    anyio.run(main)


def test_restore_refills_every_block(settings, fake):
    from memaudit.testing.adapter_contract import play

    async def main():
        async with adapter_runtime("llamaindex", settings, script(fake)) as (make, _):
            original = make()
            await play(original, LONG)
            restored = make()
            await restored.restore(original.snapshot())
            assert restored.dump() == original.dump() and restored.snapshot() == original.snapshot()
            assert await restored.search("knee", 3) == await original.search("knee", 3)
    anyio.run(main)


def test_the_library_version_is_in_the_run_provenance():
    from importlib.metadata import version

    from memaudit.rollout.runner import with_adapter_origin

    from adapters.llamaindex import LlamaIndexMemory

    recorded = with_adapter_origin({"provenance": {"protocol": "3"}}, "llamaindex")["provenance"]
    assert recorded == {"protocol": "3", "library": f"llama-index-core=={version('llama-index-core')}",
                        "configuration": [row.to_json() for row in LlamaIndexMemory.configuration()]}
