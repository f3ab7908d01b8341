"""`--memt-prompts DIR`: drive memt with Mem-T's own prompt templates, for the real Mem-T-4B policy.

Mem-T-4B was trained on its authors' prompts and their `<tool_call>{json}</tool_call>` format,
which our JSON protocol does not reproduce. This mode imports the prompt builders of a Mem-T
checkout the user provides (`memory_formation.py`, `memory_update.py`, `memory_retrieval.py`,
with Mem-T's own requirements installed); memaudit does not redistribute them. The calls are
free text; tool calls are parsed from the answer and mapped onto the same memory operations as
our own protocol. The observation after each retrieval step is our rendering of the hits.
"""
from __future__ import annotations

import hashlib
import importlib
import re
import sys
from pathlib import Path

import orjson

from memaudit.adapters.memory_calls import model_call
from memaudit.errors import BadInput
from memaudit.llm.keys import text_hash

MODULES = ("memory_formation", "memory_update", "memory_retrieval")
MAX_TOKENS = 4096  # the published integration's budget for every policy call
TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
FORMATION_ARGUMENT = {"create_fact": "fact", "create_experience": "experience", "update_persona": "profile",
                      "update_summary": "content"}
UPDATE_OP = {"add_item": "add", "update_item": "update", "delete_item": "delete", "ignore_item": "ignore"}
NEXT_STEP = "Observation:\n{observation}\n\nIf this is enough to answer, call finish; otherwise search again."


def tool_calls(text: str) -> list[tuple[str, dict]]:
    """Every well-formed `<tool_call>` in an answer as (name, arguments); a last unclosed one counts."""
    if text.count("<tool_call>") > text.count("</tool_call>"):
        text += "</tool_call>"
    found = []
    for block in TOOL_CALL.findall(text):
        try:
            data = orjson.loads(block.strip())
        except orjson.JSONDecodeError:
            continue
        for call in data if isinstance(data, list) else [data]:
            if isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("arguments"), dict):
                found.append((call["name"], call["arguments"]))
    return found


def _text(value) -> str:
    return value.strip() if isinstance(value, str) else ""


class TemplatePolicy:
    def __init__(self, checkout: Path):
        checkout = Path(checkout).resolve()
        missing = [f"{name}.py" for name in (*MODULES, "config") if not (checkout / f"{name}.py").is_file()]
        if missing:
            raise BadInput(f"cannot load Mem-T's templates: {', '.join(missing)} not found in the checkout",
                           file=str(checkout), field="memt_prompts")
        sys.path.insert(0, str(checkout))
        try:
            modules = {name: importlib.import_module(name) for name in (*MODULES, "config")}
        except Exception as exc:  # whatever the checkout or its requirements lack
            raise BadInput(f"cannot load Mem-T's templates ({type(exc).__name__}: {exc}); install Mem-T's "
                           "requirements", file=str(checkout), field="memt_prompts") from None
        finally:
            sys.path.remove(str(checkout))
        digest = hashlib.sha256()
        for name in MODULES:
            digest.update((checkout / f"{name}.py").read_bytes())
        self.mode = f"memt-templates:{digest.hexdigest()[:16]}"
        self.formation_builder = modules["memory_formation"].MemoryFormation(llm_executor=None)
        self.update_builder = modules["memory_update"].MemoryUpdate(llm_executor=None, vector_db=None)
        retrieval, config = modules["memory_retrieval"], modules["config"].SystemConfig()
        config.data_name = "memprobe"  # as the published integration configured it
        retriever = retrieval.MemoryRetriever.__new__(retrieval.MemoryRetriever)
        retriever.config, retriever.benchmark_name, retriever.db = config, config.data_name, None
        top_k = config.memory.retrieval_topk
        retriever.tools = [retrieval.SearchSummaryTool(None), retrieval.SearchFactsTool(None, top_k),
                           retrieval.SearchExperiencesTool(None, top_k), retrieval.SearchPersonasTool(None),
                           retrieval.SearchTurnsTool(None, top_k), retrieval.FinishTool(config.data_name)]
        self.retriever = retriever

    async def formation(self, adapter, event, summary: str, personas: str, turn: str) -> list[dict] | None:
        messages = self.formation_builder.construct_prompt(turn, summary, personas)
        result = await model_call(adapter, "memt_policy:formation", messages, max_tokens=MAX_TOKENS,
                                  clock=event.clock, seed_parts=adapter.seed_parts(event.task_index, event.turn,
                                                                                   "formation"))
        if result is None:
            return None
        return [{"tool": name, "name": _text(args.get("name")), "content": _text(args.get(FORMATION_ARGUMENT[name]))}
                for name, args in tool_calls(result.text) if name in FORMATION_ARGUMENT]

    async def update(self, adapter, event, collection: str, candidate: str,
                     neighbours: list[dict]) -> list[dict] | None:
        potential = {"type": collection.rstrip("s"), "document": candidate, "turn_time": event.clock,
                     "start_time": "", "end_time": ""}
        related = [{"id": item["id"], "document": adapter.document(item), "turn_time": item["metadata"].get("turn_time"),
                    "start_time": "", "end_time": ""} for item in neighbours]
        messages = self.update_builder.construct_prompt(potential, related,
                                                        self.update_builder.get_tool_schemas(collection))
        result = await model_call(adapter, "memt_policy:update", messages, max_tokens=MAX_TOKENS, clock=event.clock,
                                  seed_parts=adapter.seed_parts(event.task_index, event.turn, "update", candidate))
        if result is None:
            return None
        known = {item["id"] for item in neighbours} | set(adapter.collections[collection])
        operations = []
        for name, args in tool_calls(result.text):
            op = UPDATE_OP.get(name)
            target = _text(args.get("id")) or None
            document = _text(args.get("document"))
            if op in ("update", "delete") and target not in known:
                adapter.bad_indices.append({"clock": event.clock, "decision": op, "index": target})
            elif op == "add" and not document:
                continue  # Mem-T's add tool refuses an empty document
            elif op is not None:
                operations.append({"op": op, "target": target, "content": document})
        return operations

    def searcher(self, adapter, query: str) -> "TemplateSearch":
        return TemplateSearch(adapter, query, self.retriever.construct_prompt(query, category=""))


class TemplateSearch:
    """One ReAct search as a growing conversation, as Mem-T runs it."""

    def __init__(self, adapter, query: str, messages: list[dict]):
        self.adapter, self.query, self.messages = adapter, query, list(messages)

    async def next(self, step: int, observation: str | None) -> tuple[str, dict] | None:
        if observation is not None:
            self.messages.append({"role": "user", "content": NEXT_STEP.format(observation=observation)})
        result = await model_call(self.adapter, "memt_policy:search", self.messages, max_tokens=MAX_TOKENS,
                                  clock="search", seed_parts=self.adapter.seed_parts("search", text_hash(self.query),
                                                                                     step))
        if result is None:
            return None
        self.messages.append({"role": "assistant", "content": result.text})
        calls = tool_calls(result.text)
        if not calls:
            return "", {}  # no tool call: the step is spent, the policy is asked again
        name, args = calls[0]
        if name == "finish":
            return None
        return name, {"query": _text(args.get("query")), "name": _text(args.get("name"))}
