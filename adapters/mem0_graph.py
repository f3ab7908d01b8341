"""`mem0_graph`: Mem0 in graph mode (mem0ai 1.0.11 with its embedded Kuzu graph store, the
`mem0_graph` extra), audited as it ships, in an environment of its own.

mem0's graph mode is gone from mem0ai 2.x (mem0ai/mem0#4811), and 1.0.x cannot share memaudit's
environment with the `mem0ai` system's 2.x: each user's mem0 runs in a worker process of
`.venv-mem0_graph` (adapters/environment.py; `make install` builds it). Its model and embedding
calls go over HTTP to the recording proxy in memaudit's process, under `memory:mem0_graph`: cached,
counted and replayable like every call.

- Configured as mem0's graph documentation shows, with embedded stores: its OpenAI LLM and
  embedder at the proxy (the published integration's LLM settings, as the `mem0ai` system), an
  in-memory Qdrant for its memories, Kuzu in memory (its default) for the graph, its history in an
  in-memory SQLite; telemetry off.
- Each user message is one `add` (what the published study gave a library): its vector path
  extracts facts and decides ADD/UPDATE/DELETE against the nearest memories (two JSON answers),
  while its graph path extracts the entities, their relations and the relations the message
  contradicts (three tool calls) and merges them into the graph.
- Deterministic: the ids and times it draws, and the date its extraction prompt shows, come from
  the episode's logical clock (inside the worker).

`search` is its search: the memories its vector store ranks and the relations its graph search
finds (BM25 over the triples around the entities nearest the query's), taken in turn, each list
in its own order (`score` None: the two lists have no common scale; a memory keeps its similarity
as `similarity`). `dump` is its `get_all`: the memories, then the graph's relations (`source`,
`relationship`, `target`; content "source relationship target"). A failure mem0 logs and goes on
from (an answer it cannot parse, a failed call of its vector path) is a counted write failure. The
state is the messages given to it, re-added on restore with every call answered from the cache."""
from __future__ import annotations

import ast
import concurrent.futures
import contextvars
import hashlib
import json
import logging
import os
import re
from datetime import datetime

from memaudit.adapters.card import CardRow
from memaudit.adapters.environment import InEnvironment
from memaudit.adapters.environment_worker import LibraryWorker
from memaudit.adapters.library_clock import logical_utc_now
from memaudit.adapters.mem0_library import TELEMETRY, USER, shaped
from memaudit.adapters.upstream import PROXY_KEY, count_problems
from memaudit.errors import InvalidOutput

GRAPH_TOOLS = {"extract_entities", "establish_relationships", "delete_graph_memory"}  # its graph path's tools
DATE = "%Y-%m-%d"  # how its extraction prompt shows the date


# -- the worker half (runs in .venv-mem0_graph) ----------------------------------------------------

class ContextThreads(concurrent.futures.ThreadPoolExecutor):
    """mem0 runs a write's vector path and graph path in two pool threads, which would not see the
    running clock (a pool thread does not copy its caller's context): they run in it here."""

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)


class LoggedProblems(logging.Handler):
    """The errors mem0 logs and goes on from, kept for the op that is running."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.found.append(record.getMessage()[:300])


class Mem0GraphWorker(LibraryWorker):
    PATCHED = "mem0"

    async def open(self) -> str:
        os.environ["MEM0_DIR"] = self.folder  # its own files (a user id, a database) in the worker's folder
        imported_on = datetime.now().strftime(DATE)  # the date its prompts are written with, at import
        import mem0
        import mem0.memory.main
        from mem0 import Memory
        from qdrant_client import QdrantClient

        self.problems = LoggedProblems()
        logger = logging.getLogger("mem0")
        logger.addHandler(self.problems)
        logger.propagate = False  # its log lines go nowhere but the count
        concurrent.futures.ThreadPoolExecutor = ContextThreads
        main = mem0.memory.main
        main.get_fact_retrieval_messages = dated(main.get_fact_retrieval_messages, imported_on)
        setup = self.setup
        # Its sampling as mem0 ships it (BaseLlmConfig's temperature, top_p, max_tokens), as the mem0ai system.
        llm = {"model": setup["model"], "api_key": PROXY_KEY, "openai_base_url": setup["base_url"]}
        embedder = {"model": setup["embed_model"], "api_key": PROXY_KEY, "openai_base_url": setup["base_url"],
                    "embedding_dims": setup["dimensions"]}
        self.memory = Memory.from_config({
            "llm": {"provider": "openai", "config": llm},
            "embedder": {"provider": "openai", "config": embedder},
            "vector_store": {"provider": "qdrant", "config": {
                "collection_name": "mem0", "client": QdrantClient(":memory:"), "embedding_model_dims": setup["dimensions"]}},
            "graph_store": {"provider": "kuzu", "config": {"db": ":memory:"}},
            "history_db_path": ":memory:",
        })
        return mem0.__version__

    async def add(self, text: str) -> list[str]:
        """The failures it logged and went on from."""
        self.problems.found = []
        self.memory.add([{"role": "user", "content": text}], user_id=USER)
        return self.problems.found

    async def search(self, query: str, k: int) -> list[dict]:
        found = self.memory.search(query, user_id=USER, limit=k)
        memories = [{**memory_item(result), "score": None, "similarity": result.get("score")}
                    for result in found.get("results") or []]
        relations = [relation_item(relation) for relation in found.get("relations") or []]
        in_turn = [item for pair in zip(memories, relations) for item in pair]
        return in_turn + memories[len(relations):] + relations[len(memories):]

    async def dump(self) -> list[dict]:
        listed = self.memory.get_all(user_id=USER, limit=1_000_000)
        return ([memory_item(result) for result in listed.get("results") or []]
                + [relation_item(relation) for relation in listed.get("relations") or []])


def dated(messages, imported_on: str):
    """Its extraction prompt shows the date it was imported on (the prompt is written when its
    module loads): the episode's logical date instead."""
    def with_logical_date(*args, **kwargs):
        system, user = messages(*args, **kwargs)
        if imported_on not in system:
            raise RuntimeError("mem0's extraction prompt no longer shows the date it was imported on")
        return system.replace(imported_on, logical_utc_now().strftime(DATE)), user
    return with_logical_date


def memory_item(result: dict) -> dict:
    return {**shaped(result), "kind": "memory"}


def relation_item(relation: dict) -> dict:
    """A relation of its graph (`target` in its get_all, `destination` in its search)."""
    source, relationship = relation.get("source"), relation.get("relationship")
    target = relation.get("target", relation.get("destination"))
    digest = hashlib.sha256(f"{source}\x00{relationship}\x00{target}".encode()).hexdigest()[:16]
    return {"id": f"relation-{digest}", "content": f"{source} {relationship} {target}", "kind": "edge",
            "source": source, "relationship": relationship, "target": target}


# -- the parent half (memaudit's process) -----------------------------------------------------------

class Mem0Graph(InEnvironment):
    name = "mem0_graph"
    library = "mem0ai"
    ENVIRONMENT = "mem0_graph"
    WORKER = Mem0GraphWorker
    TELEMETRY = TELEMETRY
    TOOL_CALLING = True  # its graph path extracts by tool calls
    scored = False  # its memories and its relations in turn: no common scale
    # measured on the contract's fake: its facts and its decision (two JSON answers), the graph's
    # entities, relations and contradicted relations (three tool calls)
    CALLS_PER_MESSAGE = 5.0

    async def add(self, event) -> None:
        await self.opened()
        problems = await self.guarded(lambda: self.call("add", text=event.text))
        count_problems(self, [InvalidOutput(self.ROLE, "", f"mem0 reported: {problem}") for problem in problems or []])
        self.stored = await self.call("dump")

    # -- configuration card --------------------------------------------------------------------
    @classmethod
    def card_rows(cls) -> list[CardRow]:
        return [
            CardRow("mem0ai series", "2.x (no graph mode: mem0ai/mem0#4811)", cls.library_release(),
                    "the last series with its graph mode, in an environment of its own"),
            CardRow("graph_store", "none (graph mode off)", "kuzu, in memory (its default db)",
                    "its embedded graph store, as its graph documentation configures it"),
            CardRow("vector_store", "qdrant at /tmp/qdrant (shared by every instance)", "qdrant in memory",
                    "one store per user, nothing left behind"),
            CardRow("llm temperature, top_p, max_tokens", "0.1, 0.1, 2000", "0.1, 0.1, 2000 (the library's)",
                    "sent as mem0 sends it, as the mem0ai system (the published integration set temperature 0)"),
            CardRow("the date its extraction prompt shows", "the day its module was imported",
                    "the episode's logical date", "the prompt is written once, at import: a replay on another day differed"),
        ]

    # -- the contract's fake model (a test double: memaudit/testing/adapter_contract.py) ----------
    @staticmethod
    def fake_text(body: dict) -> str | None:
        """Its two JSON answers as a model follows its prompts: the message as one fact; each new
        fact added."""
        messages = body["messages"]
        said = str(messages[-1].get("content"))
        if len(messages) == 2 and said.startswith("Input:") and '"facts"' in str(messages[0].get("content")):
            return json.dumps({"facts": [said.removeprefix("Input:").strip().removeprefix("user:").strip()]})
        if len(messages) == 1 and '"event"' in said and said.count("```") >= 2:
            facts = ast.literal_eval(said.split("```")[-2].strip())  # the new facts, its last quoted block
            return json.dumps({"memory": [{"id": str(n), "text": fact, "event": "ADD"} for n, fact in enumerate(facts)]})
        return None

    @staticmethod
    def fake_tool_calls(request, messages: list[dict]) -> list[tuple[str, dict]] | None:
        """Its graph path's calls: the user and the message's longest word as entities, one
        relation between them, nothing contradicted."""
        names = {tool["function"]["name"] for tool in request.tools}
        if not names or not names <= GRAPH_TOOLS:
            return None
        said = str(messages[-1].get("content")).rsplit("Text:", 1)[-1]
        topic = max(re.findall(r"[A-Za-z]+", said) or ["topic"], key=len).lower()
        if "extract_entities" in names:
            return [("extract_entities", {"entities": [{"entity": USER, "entity_type": "person"},
                                                       {"entity": topic, "entity_type": "topic"}]})]
        if "establish_relationships" in names:
            return [("establish_relationships", {"entities": [
                {"source": USER, "relationship": "mentioned", "destination": topic}]})]
        return []
