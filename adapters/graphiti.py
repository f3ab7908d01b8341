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

import functools
import logging
import warnings
from contextlib import contextmanager

from memaudit.adapters.card import CardRow, keyword_default
from memaudit.adapters.deployed import (DeployedLibrary, ReplayedMessages, quiet_loggers, request_schema,
                                        upstream_imports)
from memaudit.adapters.library_clock import EPOCH, patch_modules
from memaudit.types import MemoryItem

GROUP = "user"
TELEMETRY = {"GRAPHITI_TELEMETRY_ENABLED": "false"}

with upstream_imports("graphiti", telemetry=TELEMETRY):
    import graphiti_core.llm_client.config as llm_config
    import graphiti_core.llm_client.openai_base_client as openai_base_client
    import graphiti_core.utils.datetime_utils as datetime_utils
    import kuzu
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
# Its error logs (a failed LLM call, a failed query).
quiet_loggers({"graphiti_core": logging.CRITICAL})
patch_modules("graphiti_core", utc_now=datetime_utils.utc_now)


class GraphitiMemory(ReplayedMessages, DeployedLibrary):
    name = "graphiti"
    ITEM_KINDS = {"episode": "episode", "entity": "entity", "fact": "edge"}
    library = "graphiti-core"
    TELEMETRY = TELEMETRY
    # measured on the contract's fake: 27 calls for its 7 user messages (entities, edges, their
    # resolution and the summaries)
    CALLS_PER_MESSAGE = 3.9
    # Its client asks again itself after an unusable answer, the error appended to its messages (a
    # new request), up to its MAX_RETRIES: a test's fault meets every attempt of its entity extraction.
    OWN_RETRIES = OpenAIClient.MAX_RETRIES
    faulted_request = staticmethod(lambda body: "extracted_entities" in request_schema(body).get("properties", {}))

    # -- the library ---------------------------------------------------------------------------
    async def open(self, endpoint):
        from openai import AsyncOpenAI

        client = AsyncOpenAI(api_key=endpoint.key, base_url=endpoint.base_url, timeout=endpoint.timeout,
                             max_retries=endpoint.max_retries)
        # Both of its model sizes named as the memory role's model (the proxy answers any name with
        # that model): the library sends what it sends for that model, not for its default's name.
        config = LLMConfig(api_key=endpoint.key, base_url=endpoint.base_url, model=endpoint.model,
                           small_model=endpoint.model)
        embedder = OpenAIEmbedder(OpenAIEmbedderConfig(embedding_model=endpoint.embed_model, api_key=endpoint.key,
                                                       base_url=endpoint.base_url), client=client)
        return Graphiti(graph_driver=await kuzu_driver(), llm_client=OpenAIClient(config, client=client),
                        embedder=embedder, cross_encoder=OpenAIRerankerClient(config, client=client))

    @classmethod
    def card_rows(cls) -> list[CardRow]:
        return [
            CardRow("llm client", "OpenAIClient (structured output through the Responses API)", "OpenAIClient",
                    "its default client; the proxy serves /v1/responses (before issue 41 it ran OpenAIGenericClient)"),
            CardRow("model, small_model", openai_base_client.DEFAULT_MODEL, "the memory role's model, for both",
                    "the proxy answers any name with the configured model; named so, the library sends what it "
                    "sends for that model, not its default's reasoning options",
                    lambda: openai_base_client.DEFAULT_MODEL),
            CardRow("llm temperature", str(llm_config.DEFAULT_TEMPERATURE), "the library's", "as shipped",
                    lambda: llm_config.DEFAULT_TEMPERATURE),
            CardRow("llm max_tokens", str(llm_config.DEFAULT_MAX_TOKENS), "the library's", "as shipped",
                    lambda: llm_config.DEFAULT_MAX_TOKENS),
            CardRow("reranker", "OpenAIRerankerClient (token logprobs)", "OpenAIRerankerClient at the proxy",
                    "its default; the proxy forwards logprobs; its default search does not call it"),
            CardRow("graph database", "Neo4j (a server)", "its embedded Kuzu driver, in memory, one per user",
                    "no server but loopback; patched: KuzuDriver leaves `_database` unset and builds no full-text "
                    "index its searches query, both set here with its own index definitions (getzep/graphiti#1258)"),
            CardRow("search recipe", "EDGE_HYBRID_SEARCH_RRF (facts: BM25 + cosine, reciprocal-rank fusion)",
                    "the same recipe, through search_ (which also gives its scores)", "its default search"),
            CardRow("search results", "10", "k (the assistant's --k; the retrieve pass's k)", "the audit reads k items",
                    keyword_default(Graphiti.search, "num_results")),
            CardRow("episodes", "the caller's", "one `message` episode per user message, \"user: <text>\" (rollout "
                    "--ingest exchange: the reply before it, \"assistant: …\")", "as the published study gave it"),
            CardRow("group_id", "'' (the driver's default)", "user", "one graph per user"),
        ]

    @staticmethod
    def fake_answer(body: dict) -> dict | None:
        """The contract fake's answers to its calls, told apart by their output schema: the user and
        the message's first long word as entities, one fact between them (the message's first
        words), no duplicates, no contradictions, no summary updates; other calls from their schema."""
        wanted = set(request_schema(body).get("properties", {}))
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
            name=event.clock, episode_body="\n".join(f"{m['role']}: {m['content']}" for m in self.said(event)),
            source_description="a message from the user",
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
    with warnings.catch_warnings(), bounded_databases():
        warnings.simplefilter("ignore", DeprecationWarning)  # Kuzu's deprecation notice, on every user
        driver = KuzuDriver()
    driver._database = GROUP
    for query in get_fulltext_indices(driver.provider):
        await driver.execute_query(query)
    return driver


# Kuzu's defaults for a database: a buffer pool of 80% of the machine's memory and 8 TiB of address
# space reserved. A rollout holds one in-memory database per user at once: at 50 users the
# reservations ran out of address space (mmap failed, perf/library_scale.py). Bounded per user
# (a user's graph after a study's 31 tasks is a few MB).
KUZU_BUFFER_POOL = 512 * 2**20
KUZU_MAX_SIZE = 16 * 2**30


@contextmanager
def bounded_databases():
    """`KuzuDriver` makes its database with Kuzu's defaults: while it does, with the bounds above."""
    made = kuzu.Database
    kuzu.Database = functools.partial(made, buffer_pool_size=KUZU_BUFFER_POOL, max_db_size=KUZU_MAX_SIZE)
    try:
        yield
    finally:
        kuzu.Database = made


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
