"""`graphiti`: Zep's Graphiti (graphiti-core==0.31.2 on its embedded Kuzu driver, `pip install
'memaudit-bench[graphiti]'`), a temporal knowledge graph, audited as it ships.

- Each user message is one Graphiti episode (`add_episode`, source `message`, "user: <text>", at
  the episode's logical time): the library extracts entities and facts (edges), resolves them
  against the graph and invalidates contradicted facts, with its own prompts.
- Its LLM is its default client (`OpenAIClient`: structured output through the Responses API,
  other calls as chat completions in JSON mode), its embedder `OpenAIEmbedder` and its reranker
  `OpenAIRerankerClient` (token logprobs, which the proxy forwards), all pointed at memaudit's
  recording proxy: every call is cached, counted and replayable under `memory:graphiti`;
  embeddings come from memaudit's embedder. The library's default search (hybrid BM25 + cosine,
  reciprocal-rank fusion) does not call the reranker.
- One in-memory Kuzu database per user (Kuzu's default); telemetry off; the ids and times it
  draws come from the episode's logical clock.

`search` is the library's default search (`Graphiti.search`'s recipe, through `search_` for its
scores): facts (edges), best first. `dump` is the whole graph: episodes, entities and facts.
The state is the messages given to it, re-added on restore (every call answered from the cache:
a graph database has no JSON form the library reads back)."""
from __future__ import annotations

import logging
import os
import warnings

from memaudit.adapters.base import MemoryAdapter
from memaudit.adapters.indexed import deep_copy
from memaudit.adapters.library_clock import EPOCH, LibraryClock, patch_modules
from memaudit.adapters.upstream import PROXY_KEY, PROXY_TIMEOUT, ReplayedMessages, guarded, library_route
from memaudit.errors import BadInput
from memaudit.types import MemoryItem

ROLE = "memory:graphiti"
GROUP = "user"


def _import_library():
    os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
    try:
        import graphiti_core.utils.datetime_utils as datetime_utils
        from graphiti_core import Graphiti
        from graphiti_core.cross_encoder.openai_reranker_client import OpenAIRerankerClient
        from graphiti_core.driver.kuzu_driver import KuzuDriver
        from graphiti_core.edges import EntityEdge
        from graphiti_core.errors import GroupsEdgesNotFoundError
        from graphiti_core.embedder.openai import OpenAIEmbedder, OpenAIEmbedderConfig
        from graphiti_core.graph_queries import get_fulltext_indices
        from graphiti_core.llm_client.config import LLMConfig
        from graphiti_core.llm_client.openai_client import OpenAIClient
        from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode
        from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF
    except ImportError as exc:
        raise BadInput(f"the graphiti system needs the upstream library ({exc}): "
                       "pip install 'memaudit-bench[graphiti]'", field="systems") from None
    # Its error logs (a failed LLM call, a failed query) would break the one-line output of every
    # command; each failure still reaches the adapter as an exception and is counted.
    logging.getLogger("graphiti_core").setLevel(logging.CRITICAL)
    patch_modules("graphiti_core", utc_now=datetime_utils.utc_now)
    return locals()


_lib = _import_library()  # imported with the adapter, so that a missing extra fails before a run is opened


class GraphitiMemory(ReplayedMessages, MemoryAdapter):
    name = "graphiti"
    library = "graphiti-core"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.graph = None
        self.route = None
        self.clock = LibraryClock(ctx.scope)
        self.stored: list[dict] = []  # the dump, read back from the graph after every change

    # -- the library ---------------------------------------------------------------------------
    async def _open(self):
        if self.graph is None:
            self.route = await library_route(self, ROLE)
            from openai import AsyncOpenAI

            key, url = PROXY_KEY, self.route.base_url
            client = AsyncOpenAI(api_key=key, base_url=url, timeout=PROXY_TIMEOUT, max_retries=0)
            # Both of its model sizes named as the memory role's model (the proxy answers any name
            # with that model): the library sends what it sends for that model, not for its default.
            model = self.ctx.llm.settings.role(ROLE).model
            config = _lib["LLMConfig"](api_key=key, base_url=url, model=model, small_model=model)
            embedder = _lib["OpenAIEmbedder"](_lib["OpenAIEmbedderConfig"](
                embedding_model=self.embedder.model_name, api_key=key, base_url=url), client=client)
            self.graph = _lib["Graphiti"](graph_driver=await kuzu_driver(), llm_client=_lib["OpenAIClient"](
                config, client=client), embedder=embedder, cross_encoder=_lib["OpenAIRerankerClient"](
                config, client=client))
        return self.graph

    # -- write path ----------------------------------------------------------------------------
    async def add_message(self, clock: str, task_index: int, turn: int, text: str) -> None:
        graph = await self._open()
        self.clock.last = (clock, task_index, turn)
        when = self.clock.now(EPOCH.tzinfo)
        await guarded(self, ROLE, self.route, lambda: graph.add_episode(
            name=clock, episode_body=f"user: {text}", source_description="a message from the user",
            reference_time=when, source=_lib["EpisodeType"].message, group_id=GROUP))
        self.stored = await self._read()

    # -- read paths ----------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        graph = await self._open()
        # `Graphiti.search` sets the limit on the module-level recipe object shared by every user's
        # search; the same recipe, copied, through `search_`, which also returns the scores.
        config = _lib["EDGE_HYBRID_SEARCH_RRF"].model_copy(deep=True, update={"limit": k})
        found = await guarded(self, ROLE, self.route, lambda: graph.search_(query, config=config, group_ids=[GROUP]))
        if found is None:
            return []
        items = []
        for edge, score in zip(found.edges, found.edge_reranker_scores):
            item = fact_item(edge)
            items.append(MemoryItem(item.pop("id"), item.pop("content"), float(score), item))
        return items[:k]

    def dump(self) -> list[dict]:
        return deep_copy(self.stored)

    async def _read(self) -> list[dict]:
        """The whole graph: episodes, entities, facts, each kind in creation order."""
        if self.graph is None:
            return []
        driver = self.graph.driver
        episodes = await _lib["EpisodicNode"].get_by_group_ids(driver, [GROUP])
        entities = await _lib["EntityNode"].get_by_group_ids(driver, [GROUP])
        try:
            facts = await _lib["EntityEdge"].get_by_group_ids(driver, [GROUP])
        except _lib["GroupsEdgesNotFoundError"]:  # the library's answer for a graph without facts
            facts = []
        return ([episode_item(n) for n in in_order(episodes)] + [entity_item(n) for n in in_order(entities)]
                + [fact_item(e) for e in in_order(facts)])


async def kuzu_driver():
    """An in-memory Kuzu database with the full-text indices the library's searches query.
    `KuzuDriver` builds none (its `build_indices_and_constraints` is a no-op while its searches
    call `QUERY_FTS_INDEX`) and leaves `_database` unset (read by `add_episode` for a group id):
    both set here, with the library's own index definitions."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Kuzu's deprecation notice, on every user
        driver = _lib["KuzuDriver"]()
    driver._database = GROUP
    for query in _lib["get_fulltext_indices"](driver.provider):
        await driver.execute_query(query)
    return driver


def in_order(found: list) -> list:
    return sorted(found, key=lambda x: (x.created_at, x.uuid))


def when(moment) -> str | None:
    return moment.isoformat() if moment is not None else None


def episode_item(node) -> dict:
    return {"id": node.uuid, "content": node.content, "category": "episode", "name": node.name,
            "valid_at": when(node.valid_at), "created_at": when(node.created_at)}


def entity_item(node) -> dict:
    content = f"{node.name}: {node.summary}" if node.summary else node.name
    return {"id": node.uuid, "content": content, "category": "entity", "name": node.name,
            "labels": sorted(node.labels), "summary": node.summary, "created_at": when(node.created_at)}


def fact_item(edge) -> dict:
    return {"id": edge.uuid, "content": edge.fact, "category": "fact", "name": edge.name,
            "source_node": edge.source_node_uuid, "target_node": edge.target_node_uuid,
            "valid_at": when(edge.valid_at), "invalid_at": when(edge.invalid_at),
            "expired_at": when(edge.expired_at), "episodes": list(edge.episodes), "created_at": when(edge.created_at)}
