"""`cognee`: cognee 1.6.5 with its embedded defaults (SQLite, LanceDB, its Kuzu graph store),
audited as it ships, in an environment of its own.

cognee does not install beside memaudit's other libraries (pip: ResolutionImpossible;
docs/adapters.md), so it declares its environment (`ENVIRONMENT`, adapters/environment.py): each
user's cognee runs in a worker process there (`CogneeWorker`, below), one data folder per worker.
Its model and embedding calls go over HTTP to memaudit's recording proxy in this process, under
`memory:cognee`: cached, counted and replayable like every memaudit call.

What it is given follows the published study: each user message is added to its dataset and
cognified (chunks, an extracted knowledge graph, summaries). `search` is its default search
(HYBRID_COMPLETION, its graph beside its chunks) for the context it answers from (`only_context`):
its passages, entities, facts and summaries as items, each with its `kind`; `dump` is every node of its graph
(documents, chunks, entities, entity types, summaries) with their native fields. Ids and times
follow the episode's logical clock (inside the worker). The state is the messages given to it,
re-added on restore with every call answered from the cache."""
from __future__ import annotations

import asyncio
import importlib
import os
import sys

from memaudit.adapters.card import CardRow
from memaudit.adapters.deployed import request_schema
from memaudit.adapters.environment import InEnvironment
from memaudit.adapters.environment_worker import LibraryWorker
from memaudit.adapters.upstream import PROXY_KEY
from memaudit.types import KIND

DATASET = "memaudit"
# A model name litellm knows to take `json_schema` structured output: cognee asks for a JSON
# schema only for such names, else falls back to free text. The proxy sends the request to the
# model configured for the memory role whatever name the library puts in it.
SCHEMA_MODEL = "openai/gpt-4o-mini"
# The client of its structured-output calls under this configuration (its default framework,
# litellm_native). cognee imports it on first use; imported at set-up, its retries lose their waits.
LLM_CLIENT = "cognee.infrastructure.llm.structured_output_framework.litellm_native.native_adapter"


class CogneeWorker(LibraryWorker):
    """cognee itself, in its environment: one instance (one user's) per worker process."""
    PATCHED = "cognee"

    async def open(self) -> str:
        configure(self.setup, self.folder)
        import cognee

        importlib.import_module(LLM_CLIENT)
        without_waiting([m for name, m in list(sys.modules.items()) if m is not None and name.startswith("cognee")])
        self.cognee, self.added = cognee, False  # `added`: whether a message was given yet
        return cognee.__version__

    async def add(self, text: str) -> None:
        self.added = True
        before = asyncio.all_tasks()
        try:
            await self.cognee.add(text, dataset_name=DATASET)
            runs = await self.cognee.cognify(datasets=[DATASET])
        finally:
            await self.settled(before)
        failed = [str(run) for run in (runs or {}).values() if "Errored" in type(run).__name__]
        if failed:
            raise RuntimeError(f"cognify failed: {failed[0][:300]}")

    async def settled(self, before: set) -> None:
        """Wait for the tasks cognee started for this message. When one step fails, cognee's
        asyncio.gather leaves the other running (its chunk summary, beside a failed graph
        extraction): it would make its model calls after the write is over, counted with whatever
        the adapter does next. (litellm's logging worker, started on first use, runs for good.)"""
        library = os.path.dirname(self.cognee.__file__)
        while running := [task for task in asyncio.all_tasks() - before if runs_code_of(task, library)]:
            await asyncio.wait(running)

    async def search(self, query: str, k: int) -> list[dict]:
        """cognee's default search (HYBRID_COMPLETION: its graph beside its chunks) for the context
        it would answer from (`only_context`), read from the retrieved objects as items: the
        passages, the entities with their edges, the facts and the chunks' summaries, taken in turn
        from each lane (its context shows them side by side), k in all."""
        if not self.added:  # cognee refuses to search a dataset it has never been given
            return []
        found = await self.cognee.search(query_text=query, query_type=self.cognee.SearchType.HYBRID_COMPLETION,
                                         datasets=[DATASET], top_k=k, only_context=True, verbose=True)
        lanes = [lane for result in found or [] for lane in context_lanes(result.get("objects_result") or {})]
        return interleaved(lanes)[:k]

    async def dump(self) -> list[dict]:
        from cognee.infrastructure.databases.graph import get_graph_engine

        nodes, _ = await (await get_graph_engine()).get_graph_data()
        # `raw_data_location` is a file path in this worker's data folder, not memory content.
        return [{"id": str(node_id), **{k: v for k, v in properties.items() if k != "raw_data_location"},
                 "content": node_text(properties)} for node_id, properties in nodes]


def context_lanes(objects: dict) -> list[list[dict]]:
    """The lanes of a hybrid search's retrieved objects, as items: its passages (a vector distance,
    lower nearer, kept as `distance`), its entities (their edges' sentences), its facts, and the
    summaries of the passages."""
    chunks = [{"id": str(chunk.id), "content": str(chunk.payload.get("text", "")), "kind": "chunk", "score": None,
               "distance": chunk.score, "document_name": chunk.payload.get("document_name")}
              for chunk in objects.get("chunks") or []]
    entities = [{"id": str(entity["id"]), "kind": "entity", "score": None, "name": entity.get("name"),
                 "type": entity.get("type"), "edges": [edge.get("text") for edge in entity.get("edges") or []],
                 "content": f"{entity.get('name')} ({entity.get('type')})"
                            + (f": {entity['description']}" if entity.get("description") else "")}
                for entity in objects.get("entities") or []]
    facts = [{"id": str(fact["id"]), "content": str(fact.get("text", "")), "kind": "edge", "score": None}
             for fact in objects.get("facts") or []]
    summaries = [{"id": f"{chunk_id}-summary", "content": str(text), "kind": "summary", "score": None,
                  "chunk_id": str(chunk_id)} for chunk_id, text in (objects.get("chunk_summaries") or {}).items()]
    return [chunks, entities, facts, summaries]


def interleaved(lanes: list[list[dict]]) -> list[dict]:
    """The lanes' items taken in turn, each lane in its own order."""
    out = []
    for rank in range(max((len(lane) for lane in lanes), default=0)):
        out += [lane[rank] for lane in lanes if rank < len(lane)]
    return out


def configure(setup: dict, root: str) -> None:
    """cognee's embedded defaults (SQLite, LanceDB, its Kuzu graph) and its log files in this
    worker's own folder (not the user's home, where it also prunes older logs), its LLM and
    embeddings on the proxy."""
    os.environ.update({
        "LLM_PROVIDER": "openai", "LLM_ENDPOINT": setup["base_url"], "LLM_MODEL": SCHEMA_MODEL,
        "LLM_API_KEY": PROXY_KEY,
        # Its `openai` embedding provider refuses `dimensions`; `openai_compatible` takes them.
        "EMBEDDING_PROVIDER": "openai_compatible", "EMBEDDING_ENDPOINT": setup["base_url"],
        "EMBEDDING_MODEL": setup["embed_model"], "EMBEDDING_DIMENSIONS": str(setup["dimensions"]),
        "EMBEDDING_API_KEY": PROXY_KEY,
        "DATA_ROOT_DIRECTORY": os.path.join(root, "data"), "SYSTEM_ROOT_DIRECTORY": os.path.join(root, "system"),
        "COGNEE_LOGS_DIR": os.path.join(root, "logs"),
    })


def without_waiting(cognee_modules) -> None:
    """cognee retries a failed structured-output call for at least 240 s with exponential waits.
    Under memaudit an identical request is answered from the call cache with the same outcome, so
    the waits only stall the run: keep its attempts, drop the waits and the time floor. Only the
    retries under that policy (its other retries, some bounded by time alone, keep their waits)."""
    import tenacity
    from cognee.infrastructure.llm import retry_config

    policy = retry_config.llm_retry_stop_condition
    for stop in getattr(policy, "stops", ()):
        if isinstance(stop, tenacity.stop_after_delay):
            stop.max_delay = 0
    dropped = 0
    for module in cognee_modules:
        for value in list(vars(module).values()):
            for candidate in (value, *vars(value).values()) if isinstance(value, type) else (value,):
                retrying = getattr(candidate, "retry", None)
                if isinstance(retrying, tenacity.BaseRetrying) and retrying.stop is policy:
                    retrying.wait = tenacity.wait_none()
                    dropped += 1
    if not dropped:
        raise RuntimeError(f"no retry of cognee's structured-output calls found (in {LLM_CLIENT}?)")


def node_text(node: dict) -> str:
    """What a graph node says: its text (chunks, summaries), else its name and description."""
    if node.get("text"):
        return str(node["text"])
    name, description = node.get("name") or "", node.get("description") or ""
    return f"{name}: {description}" if name and description else name or description


def runs_code_of(task: asyncio.Task, folder: str) -> bool:
    """Whether the task is unfinished and runs a coroutine defined under `folder`."""
    code = getattr(task.get_coro(), "cr_code", None)
    return not task.done() and code is not None and code.co_filename.startswith(folder)


class CogneeMemory(InEnvironment):
    name = "cognee"
    library = "cognee"
    ENVIRONMENT = "cognee"
    WORKER = CogneeWorker
    TELEMETRY = {"TELEMETRY_DISABLED": "1"}  # set in its worker before cognee is imported
    # measured on the contract's fake: its graph extraction and its chunk summary a message
    # (15 calls for 7 user messages: the first write also sends a connection probe)
    CALLS_PER_MESSAGE = 2.0
    scored = False  # its context has no scores (its passages' vector distance is the native field `distance`)
    # What its graph's nodes are (a dump node's `type`); a search item says its own kind.
    NODE_KINDS = {"DocumentChunk": "chunk", "Entity": "entity", "EntityType": "entity_type",
                  "TextSummary": "summary", "TextDocument": "document"}

    def kind_of(self, fields: dict) -> str | None:
        return fields.get(KIND) or self.NODE_KINDS.get(fields.get("type"), fields.get("type"))

    @classmethod
    def card_rows(cls) -> list[CardRow]:
        return [
            CardRow("search type", "HYBRID_COMPLETION", "HYBRID_COMPLETION with only_context (its context, no answer)",
                    "its default search; the audit reads what it would answer from (before issue 41: CHUNKS)"),
            CardRow("search top_k", "15", "k, the lanes' items taken in turn", "the audit reads k items"),
            CardRow("llm model name", "its configured one", SCHEMA_MODEL,
                    "a name litellm knows to take json_schema, so cognee asks for its schema; the proxy answers any "
                    "name with the memory role's model"),
            CardRow("embedding provider", "openai", "openai_compatible with the embedder's dimensions",
                    "its openai provider refuses `dimensions`"),
            CardRow("stores", "SQLite, LanceDB, its Kuzu graph", "the same, in the worker's own folder",
                    "its embedded defaults, one per user"),
            CardRow("structured-output retries", "at least 240 s with exponential waits", "the same attempts, no waits",
                    "a repeated request is answered from the call cache with the same outcome: the waits only stall"),
            CardRow("chunking", "its chunker, sized by the embedding model's token limit", "the library's",
                    "texts the embedding model cuts are counted (embed_truncated)"),
            CardRow("ingest", "the caller's documents", "each user message cognified (rollout --ingest exchange: "
                    "the reply before it, in one text)", "as the published study gave it"),
        ]
    # Its first write sends a free-text connection probe, then its graph extraction and its chunk
    # summary at once (asyncio.gather): a fault meets every answer to its graph extraction.
    faulted_request = staticmethod(lambda body: "nodes" in request_schema(body).get("properties", {}))
