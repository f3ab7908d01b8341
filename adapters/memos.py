"""`memos`: MemOS (the `MemoryOS` distribution, 2.0.33) `general_text` memory, audited as it
ships, in an environment of its own.

MemOS requires `openai<2`, which memaudit's other libraries do not install beside (docs/adapters.md),
so it declares its environment (`ENVIRONMENT`, adapters/environment.py): each user's memory runs in
a worker process there (`MemOSWorker`, below), on a local Qdrant store in the worker's own folder.
Its extractor model and its `universal_api` embedder (the OpenAI provider) are pointed at memaudit's
recording proxy, under `memory:memos`: cached, counted and replayable like every memaudit call.

What it is given follows the published study: each user message (the task text and each reply)
goes to `extract` as a one-message conversation and the items it extracts are added. Its extraction
answer is free text that MemOS parses as JSON: an answer its parser cannot use (no `memory list`, a
memory without its fields) raises inside `extract` and is a counted write failure. `search` is its
`search(query, top_k)` (the store's cosine ranking, in its order; it returns no scores); `dump` is
`get_all()`, every item with its metadata. Ids and times follow the episode's logical clock (MemOS
draws them with `uuid.uuid4()` and `datetime.now()`). The state is the messages given to it, added
again on restore with every call answered from the cache. Its benchmarked `tree_text` mode needs a
graph database (Neo4j) and is not this system."""
from __future__ import annotations

import json
import os
import re

from memaudit.adapters.card import CardRow
from memaudit.adapters.environment import InEnvironment
from memaudit.adapters.environment_worker import LibraryWorker
from memaudit.adapters.upstream import PROXY_KEY, PROXY_TIMEOUT

COLLECTION = "memaudit"
KIND = "memory"  # what a stored MemOS item is (docs/adapters.md: an item's kind)


class MemOSWorker(LibraryWorker):
    """MemOS itself, in its environment: one `general_text` memory (one user's) per worker."""
    PATCHED = "memos"

    async def open(self) -> str:
        # Its log file goes under MEMOS_BASE_PATH (the working folder by default); its embedder's
        # requests time out after MOS_EMBEDDER_TIMEOUT seconds (5 by default), which made a write
        # depend on how busy the local embedder was: it waits for the proxy like every library.
        os.environ.update({"MEMOS_BASE_PATH": self.folder, "MOS_EMBEDDER_TIMEOUT": str(int(PROXY_TIMEOUT))})
        from importlib.metadata import version

        from memos.configs.memory import MemoryConfigFactory
        from memos.memories.factory import MemoryFactory

        self.memory = MemoryFactory.from_config(MemoryConfigFactory(backend="general_text", config=config(self.setup, self.folder)))
        # Its clients keep the openai defaults (2 retries, 600 s): memaudit's client retries and
        # applies the timeouts, so the library's would only send the same request again.
        llm = self.memory.extractor_llm
        llm.client = llm.client.with_options(max_retries=0, timeout=PROXY_TIMEOUT)
        embedder = self.memory.embedder
        embedder.client = embedder.client.with_options(max_retries=0)
        return version("MemoryOS")

    async def add(self, text: str) -> None:
        self.memory.add(self.memory.extract([{"role": "user", "content": text}]))

    async def search(self, query: str, k: int) -> list[dict]:
        # Its hits, best first, come without their scores.
        return [{**memory_item(item.model_dump()), "score": None} for item in self.memory.search(query, top_k=k)]

    async def dump(self) -> list[dict]:
        return [memory_item(item.model_dump()) for item in self.memory.get_all()]


def config(setup: dict, folder: str) -> dict:
    """MemOS's `general_text` configuration as its examples write it: an OpenAI-compatible
    extractor, a local Qdrant collection (cosine) and the `universal_api` embedder, the model and
    the embedder at the proxy. Its sampling settings are its defaults."""
    return {
        "extractor_llm": {"backend": "openai", "config": {
            "model_name_or_path": setup["model"], "api_key": PROXY_KEY, "api_base": setup["base_url"]}},
        "vector_db": {"backend": "qdrant", "config": {
            "collection_name": COLLECTION, "distance_metric": "cosine", "vector_dimension": setup["dimensions"],
            "path": os.path.join(folder, "qdrant")}},
        "embedder": {"backend": "universal_api", "config": {
            "provider": "openai", "api_key": PROXY_KEY, "base_url": setup["base_url"],
            "model_name_or_path": setup["embed_model"]}},
    }


class MemOSMemory(InEnvironment):
    name = "memos"
    library = "MemoryOS"
    ENVIRONMENT = "memos"
    WORKER = MemOSWorker
    CALLS_PER_MESSAGE = 1.0  # one extraction call (and one embedding request) per message
    PARSES_FREE_TEXT = True
    scored = False  # its search gives its hits best first, without their scores

    @classmethod
    def card_rows(cls) -> list[CardRow]:
        return [
            CardRow("memory backend", "general_text (tree_text is benchmarked, with Neo4j)", "general_text",
                    "the mode that runs on an embedded store (local Qdrant); tree_text needs a graph database server"),
            CardRow("vector_db", "qdrant (a server, or a local path)", "qdrant, local path in the worker's folder",
                    "one embedded store per user, nothing listening"),
            CardRow("embedder backend", "its configured backend", "universal_api (provider openai) at the proxy",
                    "the OpenAI-compatible embedder its configuration offers"),
            CardRow("what extract is given", "a conversation (a list of messages)", "each user message, alone",
                    "what the published study gave every library"),
            CardRow("MOS_EMBEDDER_TIMEOUT", "5 s", f"{PROXY_TIMEOUT:.0f} s",
                    "a write must not depend on how busy the local embedder is"),
            CardRow("extractor sampling", "temperature 0.7, top_p 0.95, max_tokens 8192", "its defaults",
                    "as it ships"),
        ]

    # -- the contract's fake model (a test double: memaudit/testing/adapter_contract.py) ----------
    @staticmethod
    def fake_text(body: dict) -> str | None:
        """As a model answers MemOS's extraction prompt: its JSON, one memory quoting the message."""
        prompt = str(body.get("messages", [{}])[-1].get("content", ""))
        if '"memory list"' not in prompt or not prompt.rstrip().endswith("Your Output:"):
            return None
        conversation = prompt.rsplit("Conversation:\n", 1)[-1].rsplit("Your Output:", 1)[0]
        text = conversation.strip().removeprefix("user:").strip()
        words = re.findall(r"[A-Za-z]+", text)
        return json.dumps({"memory list": [{"key": max(words, key=len) if words else "note",
                                            "memory_type": "LongTermMemory", "value": f"The user said: {text}",
                                            "tags": sorted({w.lower() for w in words if len(w) > 4})[:3]}],
                           "summary": f"The user said: {text}"})


def memory_item(item: dict) -> dict:
    """A MemOS item (`TextualMemoryItem.model_dump()`) in the dump's shape: its text as `content`,
    its metadata beside it."""
    return {"id": str(item["id"]), "content": str(item.get("memory", "")), "kind": KIND,
            **{name: value for name, value in (item.get("metadata") or {}).items()}}
