"""`--memt-prompts DIR`: memt builds its calls with the prompt builders of a Mem-T checkout and
parses `<tool_call>` answers. A stand-in checkout with the same interfaces (not Mem-T's code)
pins the wiring: formation, update by item id, the ReAct conversation, and finish."""
from __future__ import annotations

from dataclasses import replace
from textwrap import dedent

import anyio
import orjson
import pytest

from memaudit.adapters.base import Event
from memaudit.errors import BadInput
from tests.adapters.conftest import adapter_runtime

STAND_IN = {
    "config.py": """
        class _Memory:
            retrieval_topk = 5
            max_tool_steps = 6
        class SystemConfig:
            def __init__(self):
                self.memory = _Memory()
                self.data_name = "locomo"
    """,
    "memory_formation.py": """
        class MemoryFormation:
            def __init__(self, llm_executor):
                pass
            def construct_prompt(self, turn_text, prev_summary, prev_personas):
                return [{"role": "system", "content": "FORMATION"},
                        {"role": "user", "content": f"S={prev_summary}|P={prev_personas}|T={turn_text}"}]
    """,
    "memory_update.py": """
        import json
        class MemoryUpdate:
            def __init__(self, llm_executor, vector_db):
                pass
            def get_tool_schemas(self, collection_name):
                return [collection_name]
            def construct_prompt(self, potential_item, related_items, tool_schemas):
                return [{"role": "system", "content": "UPDATE"},
                        {"role": "user", "content": json.dumps([potential_item, related_items])}]
    """,
    "memory_retrieval.py": """
        class _Tool:
            def __init__(self, *args):
                self.name = type(self).__name__
        class SearchSummaryTool(_Tool): pass
        class SearchFactsTool(_Tool): pass
        class SearchExperiencesTool(_Tool): pass
        class SearchPersonasTool(_Tool): pass
        class SearchTurnsTool(_Tool): pass
        class FinishTool(_Tool): pass
        class MemoryRetriever:
            def construct_prompt(self, user_query, category=""):
                names = ",".join(t.name for t in self.tools)
                return [{"role": "system", "content": f"RETRIEVAL {names} {self.config.memory.max_tool_steps}"},
                        {"role": "user", "content": user_query}]
    """,
}


def call(tool, **arguments) -> str:
    return f"<tool_call> {orjson.dumps({'name': tool, 'arguments': arguments}).decode()} </tool_call>"


def answer(body) -> str:
    system, last = body["messages"][0]["content"], body["messages"][-1]["content"]
    if system == "FORMATION":
        return "Thought: new facts." + call("create_fact", fact="Drinks green tea.", start_time="", end_time="") + \
            call("update_persona", name="User", profile="A tea drinker.")
    if system == "UPDATE":
        related = orjson.loads(last)[1]
        if related:
            return call("update_item", id=related[0]["id"], document="Drinks green tea daily.")
        return call("add_item", document="Drinks green tea.")
    if len(body["messages"]) == 2:
        return "Thought: look.\n" + call("search_facts", query="tea")
    return "Thought: enough.\n" + call("finish", answer="green tea")


@pytest.fixture
def checkout(tmp_path):
    folder = tmp_path / "Mem-T"
    folder.mkdir()
    for name, text in STAND_IN.items():
        (folder / name).write_text(dedent(text))
    return folder


def test_memt_runs_on_the_checkout_templates(settings, fake, checkout):
    fake.on_text(answer)

    async def main():
        async with adapter_runtime("memt", replace(settings, memt_prompts=checkout), fake) as (make, rt):
            memt = make()
            await memt.observe(Event("task_start", "I drink green tea.", 1, 0))
            await memt.observe(Event("user", "Every day, in fact.", 1, 1))
            facts = [i for i in memt.dump() if i["category"] == "facts"]
            assert [f["metadata"]["memory_content"] for f in facts] == ["Drinks green tea daily."]
            assert facts[0]["metadata"]["original_turns"] == ["user said: I drink green tea.",
                                                              "user said: Every day, in fact."]
            assert memt.snapshot()["policy"].startswith("memt-templates:")
            found = await memt.search("what does the user drink", 5)
            assert [i.content for i in found] == ["Drinks green tea daily."]
            retrieval = [r for r in fake.requests if r["messages"][0]["content"].startswith("RETRIEVAL")]
            assert retrieval[0]["messages"][0]["content"] == ("RETRIEVAL SearchSummaryTool,SearchFactsTool,"
                                                             "SearchExperiencesTool,SearchPersonasTool,"
                                                             "SearchTurnsTool,FinishTool 6")
            assert len(retrieval) == 2 and "Observation:" in retrieval[1]["messages"][-1]["content"]
    anyio.run(main)


def test_a_folder_without_the_templates_is_refused(settings, fake, tmp_path):
    async def main():
        async with adapter_runtime("memt", replace(settings, memt_prompts=tmp_path), fake) as (make, rt):
            with pytest.raises(BadInput, match="cannot load Mem-T's templates"):
                make()
    anyio.run(main)
