"""`graphiti`: Zep's Graphiti (graphiti-core==0.31.2 on its embedded Kuzu driver, `pip install
'memaudit-bench[graphiti]'`), a temporal knowledge graph, audited as it ships.

- Each user message is one Graphiti episode (`add_episode`, source `message`, "user: <text>", at
  the episode's logical time): the library extracts entities and facts (edges), resolves them
  against the graph and invalidates contradicted facts, with its own prompts.
- Its LLM is its chat-completions client with JSON-schema structured output
  (`OpenAIGenericClient`; the default client uses the Responses API, which the recording proxy,
  like most OpenAI-compatible servers, does not serve) and its embedder `OpenAIEmbedder`, both
  pointed at memaudit's recording proxy: every call is cached, counted and replayable under
  `memory:graphiti`; embeddings come from memaudit's embedder.
- Its reranker is local (`EmbeddingReranker`, cosine over memaudit's embedder): the default one
  needs token logprobs, which few servers return; the library's default search (hybrid BM25 +
  cosine, reciprocal-rank fusion) does not use a reranker at all.
- One in-memory Kuzu database per user (Kuzu's default); telemetry off; the ids and times it
  draws come from the episode's logical clock.

`search` is the library's default search (`Graphiti.search`'s recipe, through `search_` for its
scores): facts (edges), best first. `dump` is the whole graph: episodes, entities and facts.
The state is the messages given to it, re-added on restore (every call answered from the cache:
a graph database has no JSON form the library reads back)."""
from __future__ import annotations

import logging
import warnings

from memaudit.adapters.deployed import DeployedLibrary, ReplayedMessages, quiet_loggers, upstream_imports
from memaudit.adapters.library_clock import EPOCH, patch_modules
from memaudit.llm.embed import top_k
from memaudit.types import MemoryItem

GROUP = "user"
TELEMETRY = {"GRAPHITI_TELEMETRY_ENABLED": "false"}

with upstream_imports("graphiti", telemetry=TELEMETRY):
    import graphiti_core.utils.datetime_utils as datetime_utils
    from graphiti_core import Graphiti
    from graphiti_core.cross_encoder.client import CrossEncoderClient
    from graphiti_core.driver.kuzu_driver import KuzuDriver
    from graphiti_core.edges import EntityEdge
    from graphiti_core.errors import GroupsEdgesNotFoundError
    from graphiti_core.embedder.openai import OpenAIEmbedder, OpenAIEmbedderConfig
    from graphiti_core.graph_queries import get_fulltext_indices
    from graphiti_core.llm_client.config import LLMConfig
    from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient
    from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode
    from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF
# Its error logs (a failed LLM call, a failed query).
quiet_loggers({"graphiti_core": logging.CRITICAL})
patch_modules("graphiti_core", utc_now=datetime_utils.utc_now)


class EmbeddingReranker(CrossEncoderClient):
    """A local reranker for Graphiti's cross-encoder recipes: cosine between the query and each
    passage over memaudit's embedder (the library's default reranker needs token logprobs)."""

    def __init__(self, embedder):
        self.embedder = embedder

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        if not passages:
            return []
        vectors = await self.embedder.embed(passages)
        ranked = top_k(vectors, (await self.embedder.embed([query]))[0], len(passages))
        return [(passages[i], float(score)) for i, score in ranked]


class GraphitiMemory(ReplayedMessages, DeployedLibrary):
    name = "graphiti"
    library = "graphiti-core"
    TELEMETRY = TELEMETRY
    # measured on the contract's fake: 27 calls for its 7 user messages (entities, edges, their
    # resolution and the summaries)
    CALLS_PER_MESSAGE = 3.9

    # -- the library ---------------------------------------------------------------------------
    async def open(self, endpoint):
        from openai import AsyncOpenAI

        client = AsyncOpenAI(api_key=endpoint.key, base_url=endpoint.base_url, timeout=endpoint.timeout,
                             max_retries=endpoint.max_retries)
        llm = OpenAIGenericClient(LLMConfig(api_key=endpoint.key, base_url=endpoint.base_url, model=endpoint.model),
                                  client=client)
        embedder = OpenAIEmbedder(OpenAIEmbedderConfig(embedding_model=endpoint.embed_model, api_key=endpoint.key,
                                                       base_url=endpoint.base_url), client=client)
        return Graphiti(graph_driver=await kuzu_driver(), llm_client=llm, embedder=embedder,
                        cross_encoder=EmbeddingReranker(self.embedder))

    @staticmethod
    def fake_answer(body: dict) -> dict | None:
        """The contract fake's answers to its calls, told apart by their output schema: the user and
        the message's first long word as entities, one fact between them (the message's first
        words), no duplicates, no contradictions, no summary updates; other calls from their schema."""
        format_ = body.get("response_format") or {}
        wanted = set(((format_.get("json_schema") or format_).get("schema") or {}).get("properties", {}))
        prompt = "\n".join(str(m.get("content")) for m in body["messages"])
        said = prompt.rsplit("user: ", 1)[-1].split("\n", 1)[0] if "user: " in prompt else "something"
        topic = next((w.strip(".,;:!?").capitalize() for w in said.split() if len(w) > 5), "Topic")
        answer = {}
        if "extracted_entities" in wanted:
            answer["extracted_entities"] = [{"name": name, "entity_type_id": 0, "episode_indices": [0]}
                                            for name in ("User", topic)]
        if "edges" in wanted:
            answer["edges"] = [{"source_entity_name": "User", "target_entity_name": topic,
                                "relation_type": "MENTIONED", "fact": f"User said: {said[:80]}", "valid_at": None,
                                "invalid_at": None, "episode_indices": [0]}]
        for name in wanted & {"entity_resolutions", "duplicate_facts", "contradicted_facts", "summaries", "timestamps"}:
            answer[name] = []
        return answer or None

    # -- write path ----------------------------------------------------------------------------
    async def add(self, event) -> None:
        graph = await self.opened()
        when = self.clock.now(EPOCH.tzinfo)
        await self.guarded(lambda: graph.add_episode(
            name=event.clock, episode_body=f"user: {event.text}", source_description="a message from the user",
            reference_time=when, source=EpisodeType.message, group_id=GROUP))
        self.stored = await self._read()

    # -- read paths ----------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        graph = await self.opened()
        # `Graphiti.search` sets the limit on the module-level recipe object shared by every user's
        # search; the same recipe, copied, through `search_`, which also returns the scores.
        config = EDGE_HYBRID_SEARCH_RRF.model_copy(deep=True, update={"limit": k})
        found = await self.guarded(lambda: graph.search_(query, config=config, group_ids=[GROUP]))
        if found is None:
            return []
        items = []
        for edge, score in zip(found.edges, found.edge_reranker_scores):
            item = fact_item(edge)
            items.append(MemoryItem(item.pop("id"), item.pop("content"), float(score), item))
        return items[:k]

    async def _read(self) -> list[dict]:
        """The whole graph: episodes, entities, facts, each kind in creation order."""
        driver = self.instance.driver
        episodes = await EpisodicNode.get_by_group_ids(driver, [GROUP])
        entities = await EntityNode.get_by_group_ids(driver, [GROUP])
        try:
            facts = await EntityEdge.get_by_group_ids(driver, [GROUP])
        except GroupsEdgesNotFoundError:  # the library's answer for a graph without facts
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
        driver = KuzuDriver()
    driver._database = GROUP
    for query in get_fulltext_indices(driver.provider):
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
