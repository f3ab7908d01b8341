"""`llamaindex`: LlamaIndex's `Memory` (llama-index-core==0.14.25, `pip install
'memaudit-bench[llamaindex]'`) with its fact-extraction and vector memory blocks, audited as it ships.

- Configured as the library documents long-term memory: a short-term queue that keeps 2% of a
  40,000-token memory and flushes 500 tokens at a time into its blocks, a
  `FactExtractionMemoryBlock` (at most 50 facts) and a `VectorMemoryBlock` over an embedded vector
  store that keeps text (an in-process Qdrant: the core's own vector store keeps none, and the
  block refuses a store without text).
- Its LLM (`OpenAILike`, the library's client for OpenAI-compatible servers) and its embedding
  model (`OpenAIEmbedding`) point at memaudit's recording proxy: every call goes through memaudit's
  client under `memory:llamaindex`, cached, counted, replayable; embeddings come from memaudit's
  embedder. Its tokenizer encoding is the copy the library ships (nothing is downloaded).
- Deterministic: the node ids it draws come from the episode's logical clock.

What it is given follows the published study: each message from the user (the task text and each
reply), as a user message (`--ingest exchange`: after the assistant reply it answers). `search`
is what `Memory` retrieves, its facts and its vector block's nodes, the k nearest to the query by
the block's own embedding model and vector store (the library ranks its nodes so and puts every
fact in context); `context` is what the library's agent-facing call returns, `Memory.aget` for
the message: its memory blocks' text (every fact, the vector block's retrieval) and the short-term
queue (but the current task's messages, which the assistant's prompt already holds). `dump` is
everything it can give back: the facts, the vector block's nodes and the messages still in its
short-term queue. A fact-extraction answer without the
`<facts>` block the library parses is a counted write failure (the library would silently keep
nothing)."""
from __future__ import annotations

import hashlib
import uuid
import warnings

from memaudit.adapters.base import AgentContext
from memaudit.adapters.card import CardRow, field_default
from memaudit.adapters.deployed import DeployedLibrary, RefilledStore, upstream_imports
from memaudit.adapters.library_clock import patch_modules
from memaudit.adapters.upstream import count_problems
from memaudit.errors import BadInput, InvalidOutput
from memaudit.types import MemoryItem

SESSION = "user"
# The library's documented long-term-memory configuration.
TOKEN_LIMIT = 40_000
CHAT_HISTORY_TOKEN_RATIO = 0.02
TOKEN_FLUSH_SIZE = 500
MAX_FACTS = 50
FACTS_BLOCK, VECTOR_BLOCK, SHORT_TERM = "extracted_info", "vector_memory", "short_term"
COLLECTION = "llama_memory"
# OpenAILike's own default is 3,900 tokens (field_default below); the library only uses the window
# to budget its prompts: a current chat model's window, which the fact block's prompt fits in.
LLM_CONTEXT_WINDOW = 128_000

with upstream_imports("llamaindex"):
    import llama_index.core.schema
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.memory import FactExtractionMemoryBlock, Memory, VectorMemoryBlock
    from llama_index.embeddings.openai import OpenAIEmbedding
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.vector_stores.qdrant import QdrantVectorStore
warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
patch_modules(llama_index.core.schema.__name__)  # TextNode ids


class CheckedLLM(OpenAILike):
    """OpenAILike that keeps, instead of raising, what went wrong with a call: an answer the fact
    block cannot parse (no `<facts>` block: the library would keep nothing, without a trace) or a
    failed call (raised, it would leave the vector block's write of the same flush running in the
    background). The block then parses no facts from the empty answer, as it does from an unusable
    one; the adapter counts each problem (memaudit/adapters/upstream.py `guarded`)."""

    _problems: list = PrivateAttr(default_factory=list)

    async def achat(self, messages, **kwargs):
        try:
            response = await super().achat(messages, **kwargs)
        except Exception as exc:
            self._problems.append(exc)
            return ChatResponse(message=ChatMessage(role="assistant", content=""))
        text = response.message.content or ""
        if "<facts>" not in text and "<facts/>" not in text:
            self._problems.append(InvalidOutput(LlamaIndexMemory.ROLE, text, "the answer has no <facts> block"))
        return response

    def take_problems(self) -> list:
        found, self._problems = self._problems, []
        return found


class LlamaIndexMemory(RefilledStore, DeployedLibrary):
    name = "llamaindex"
    ITEM_KINDS = {FACTS_BLOCK: "fact", VECTOR_BLOCK: "chunk", SHORT_TERM: "message"}
    library = "llama-index-core"
    QUEUED_WRITES = True
    # measured on the contract's fake with messages of ~250 words: one fact extraction
    # a flush of its short-term queue (1 call for 7 messages); shorter messages flush less often
    CALLS_PER_MESSAGE = 0.14
    short_term_kinds = frozenset({"message"})  # the chat queue, before its blocks take it in

    def __init__(self, ctx):
        super().__init__(ctx)
        self.given_this_task = 0  # messages given during the current episode (the newest of the queue)

    # -- the library ---------------------------------------------------------------------------
    async def open(self, endpoint):
        from qdrant_client import AsyncQdrantClient
        llm = CheckedLLM(model=endpoint.model, api_base=endpoint.base_url, api_key=endpoint.key, is_chat_model=True,
                         context_window=LLM_CONTEXT_WINDOW, max_retries=endpoint.max_retries, timeout=endpoint.timeout)
        embed_model = OpenAIEmbedding(model_name=endpoint.embed_model, api_base=endpoint.base_url, api_key=endpoint.key,
                                      max_retries=endpoint.max_retries, timeout=endpoint.timeout)
        store = QdrantVectorStore(collection_name=COLLECTION, aclient=AsyncQdrantClient(location=":memory:"))
        # What its first flush would create (card: "qdrant collection"): Memory.aget reads it before.
        await store._acreate_collection(COLLECTION, await self.dimensions())
        return Memory.from_defaults(
            session_id=SESSION, token_limit=TOKEN_LIMIT, chat_history_token_ratio=CHAT_HISTORY_TOKEN_RATIO,
            token_flush_size=TOKEN_FLUSH_SIZE, async_database_uri="sqlite+aiosqlite:///:memory:",
            memory_blocks=[
                FactExtractionMemoryBlock(name=FACTS_BLOCK, llm=llm, max_facts=MAX_FACTS, priority=1),
                VectorMemoryBlock(name=VECTOR_BLOCK, vector_store=store, embed_model=embed_model, priority=2),
            ])

    def _block(self, name: str):
        return next(block for block in self.instance.memory_blocks if block.name == name)

    @classmethod
    def card_rows(cls) -> list[CardRow]:
        why_doc = "its documentation's long-term-memory configuration"
        return [
            CardRow("Memory token_limit", "30000", f"{TOKEN_LIMIT}", why_doc, field_default(Memory, "token_limit")),
            CardRow("Memory chat_history_token_ratio", "0.7", f"{CHAT_HISTORY_TOKEN_RATIO}", why_doc,
                    field_default(Memory, "chat_history_token_ratio")),
            CardRow("Memory token_flush_size", "3000", f"{TOKEN_FLUSH_SIZE}", why_doc,
                    field_default(Memory, "token_flush_size")),
            CardRow("memory blocks", "none", "FactExtractionMemoryBlock (priority 1), VectorMemoryBlock (priority 2)",
                    why_doc),
            CardRow("FactExtractionMemoryBlock max_facts", "50", f"{MAX_FACTS}", why_doc,
                    field_default(FactExtractionMemoryBlock, "max_facts")),
            CardRow("VectorMemoryBlock similarity_top_k", "2", "2 (the library's) in context(); k in search",
                    "Memory.aget is the assistant's context as shipped; the retrieve pass reads k items",
                    field_default(VectorMemoryBlock, "similarity_top_k")),
            CardRow("vector store", "none (the block needs one that keeps text)", "qdrant in process (:memory:)",
                    "the core's own vector store keeps no text, which the block refuses"),
            CardRow("qdrant collection", "created by the first flush", "created at open, by the store's own "
                    "_acreate_collection (the same parameters)", "Memory.aget queries the vector block before its "
                    "first flush, and Qdrant answers a missing collection with an error: every early context "
                    "would be a failed call"),
            CardRow("chunking", "a flushed batch of messages is one node", "the library's",
                    "no chunker: a node longer than the embedding model's window is cut there, counted "
                    "(embed_truncated, Table 2)"),
            CardRow("llm", "OpenAILike", "OpenAILike at the proxy, is_chat_model=True",
                    "its client for OpenAI-compatible servers; the proxy serves chat completions"),
            CardRow("OpenAILike is_chat_model", "False", "True", "the proxy serves chat completions",
                    field_default(OpenAILike, "is_chat_model")),
            CardRow("OpenAILike context_window", "3900", f"{LLM_CONTEXT_WINDOW}", "a current chat model's window; "
                    "the library only budgets its prompts with it", field_default(OpenAILike, "context_window")),
            CardRow("OpenAILike temperature", "0.1", "0.1 (the library's)", "as shipped",
                    field_default(OpenAILike, "temperature")),
            CardRow("search", "Memory.aget (every fact, the vector block's top 2)", "facts and vector nodes, the k "
                    "nearest to the query by the block's embedding model", "what Memory retrieves, k items"),
            CardRow("answers without <facts>", "kept as no facts, silently", "counted as write failures",
                    "an empty memory would otherwise look like one that remembered nothing"),
        ]

    @staticmethod
    def fake_text(body: dict) -> str | None:
        """The contract fake's fact block (a plain completion): one `<fact>` per flushed message, its
        first words."""
        if "<existing_facts>" not in str(body["messages"][-1].get("content")):
            return None
        said = [str(m.get("content")) for m in body["messages"][:-1] if m.get("role") == "user"]
        return "<facts>" + "".join(f"<fact>{text[:60]}</fact>" for text in said) + "</facts>"

    # -- write path ----------------------------------------------------------------------------
    async def observe(self, event) -> None:
        if event.kind == "episode_end":
            self.given_this_task = 0
        await super().observe(event)

    async def add(self, event) -> None:
        memory = await self.opened()
        messages = [ChatMessage(role=m["role"], content=m["content"]) for m in self.said(event)]
        self.given_this_task += len(messages)
        # A user message alone as the published study gave it (`aput`), an exchange as one batch.
        await self.guarded(lambda: memory.aput(messages[0]) if len(messages) == 1 else memory.aput_messages(messages))
        count_problems(self, self._block(FACTS_BLOCK).llm.take_problems())
        self.stored = await self._read()

    # -- read paths ----------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        await self.opened()
        found = await self.guarded(lambda: self._retrieved(query, k))
        return found or []

    async def _retrieved(self, query: str, k: int) -> list[MemoryItem]:
        """Its facts and its vector block's top-k nodes for the query, scored as the block's vector
        store scores its nodes (cosine over the block's embedding model), the k best."""
        from llama_index.core.vector_stores.types import VectorStoreQuery

        block = self._block(VECTOR_BLOCK)
        embedding = await block.embed_model.aget_query_embedding(query)
        found = await block.vector_store.aquery(VectorStoreQuery(query_str=query, query_embedding=embedding,
                                                                 similarity_top_k=k))
        items = [MemoryItem(node.node_id, node.get_content(), score, {"category": VECTOR_BLOCK})
                 for node, score in zip(found.nodes or [], found.similarities or [])]
        facts = self._block(FACTS_BLOCK).facts
        if facts:
            vectors = await block.embed_model.aget_text_embedding_batch(facts)
            items += [MemoryItem(f"fact-{n}", fact, cosine(embedding, vector), {"category": FACTS_BLOCK})
                      for n, (fact, vector) in enumerate(zip(facts, vectors), 1)]
        return sorted(items, key=lambda item: -item.score)[:k]  # stable: nodes before facts on a tie

    async def context(self, query: str, k: int) -> AgentContext:
        """`Memory.aget` for the message: the memory blocks' text as the library inserts it (into the
        system message) and its short-term queue, but this task's messages (already in the prompt)."""
        memory = await self.opened()
        messages = await self.guarded(lambda: memory.aget(input=query)) or []
        system = [m for m in messages if m.role.value == "system"]
        queue = [{"role": m.role.value, "content": m.content or ""} for m in messages if m.role.value != "system"]
        return AgentContext(preamble="\n".join(m.content or "" for m in system),
                            history=queue[:max(len(queue) - self.given_this_task, 0)])

    async def _read(self) -> list[dict]:
        """Everything the library can give back, in its blocks' order: facts, vector nodes (in
        the order they were added), then the short-term queue."""
        from llama_index.core.storage.chat_store.base_db import MessageStatus

        facts = [{"id": f"fact-{n}", "content": fact, "category": FACTS_BLOCK}
                 for n, fact in enumerate(self._block(FACTS_BLOCK).facts, 1)]
        nodes = [{"id": node.node_id, "content": node.get_content(), "category": VECTOR_BLOCK,
                  "metadata": dict(node.metadata)} for node in await self._nodes()]
        queue = await self.instance.sql_store.get_messages(SESSION, status=MessageStatus.ACTIVE)
        messages = [{"id": f"message-{n}", "content": message.content or "", "category": SHORT_TERM,
                     "role": message.role.value} for n, message in enumerate(queue, 1)]
        return facts + nodes + messages

    async def _nodes(self) -> list:
        """The vector block's nodes."""
        block = self._block(VECTOR_BLOCK)
        nodes = await block.vector_store.aget_nodes()
        return nodes  # in id order: the ids follow the logical clock

    # -- state (snapshot and restore: deployed.RefilledStore) ---------------------------------
    async def load_items(self, items: list[dict]) -> None:
        """A dumped store (ours, or any items with `content`): our facts and queue back in their
        places, every other item a node of the vector block, searched as the library searches."""
        stored = []
        for n, item in enumerate(items, 1):
            if not isinstance(item, dict) or not isinstance(item.get("content"), str):
                raise BadInput(f"memory {n} needs a string 'content'", field="content")
            if item.get("category") in (FACTS_BLOCK, SHORT_TERM):
                stored.append(item)
            else:
                stored.append({"id": node_id(item.get("id"), n, item["content"]), "content": item["content"],
                               "category": VECTOR_BLOCK, "metadata": item.get("metadata") or {}})
        await self._refill(stored)

    async def _refill(self, stored: list[dict]) -> None:
        """The blocks and the queue filled with dumped items; the nodes re-embedded (from the
        cache) through the library's own embedding model."""
        from llama_index.core.schema import TextNode
        from llama_index.core.storage.chat_store.base_db import MessageStatus

        memory = await self.opened()
        self._block(FACTS_BLOCK).facts = [item["content"] for item in stored if item["category"] == FACTS_BLOCK]
        nodes = [TextNode(id_=item["id"], text=item["content"], metadata=item["metadata"])
                 for item in stored if item["category"] == VECTOR_BLOCK]
        queue = [ChatMessage(role=item.get("role", "user"), content=item["content"])
                 for item in stored if item["category"] == SHORT_TERM]
        block = self._block(VECTOR_BLOCK)

        async def refill():
            for node in nodes:
                node.embedding = await block.embed_model.aget_text_embedding(node.text)
            if nodes:
                await block.vector_store.async_add(nodes)
            if queue:
                await memory.sql_store.add_messages(SESSION, queue, status=MessageStatus.ACTIVE)
        await self.guarded(refill)
        self.stored = await self._read()


def cosine(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norms if norms else 0.0


def node_id(given, n: int, content: str) -> str:
    """A dumped item's id where it is a UUID (the vector store takes no other), else one made from
    its position and text."""
    try:
        return str(uuid.UUID(str(given)))
    except ValueError:
        return str(uuid.UUID(bytes=hashlib.sha256(f"{n}\x00{content}".encode()).digest()[:16]))
