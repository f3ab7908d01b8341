"""`file_memory`: memory as two files an LLM maintains.

After each episode one call rewrites MEMORY.md (durable facts about the user, organised under
`## ` headings) and writes a HISTORY.md entry, appended under the episode's logical date
(`task012`). MEMORY.md is always in the assistant's context (the preamble); `search` ranks
MEMORY.md sections and HISTORY.md entries by embedding; `dump` returns both as items. If the
rewrite call fails, both files stay as they were and the failure is counted."""
from __future__ import annotations

from memaudit.adapters.base import AgentContext, Event, MemoryAdapter
from memaudit.adapters.indexed import as_memory_item, deep_copy
from memaudit.adapters.memory_calls import memory_call
from memaudit.adapters.vector_index import VectorIndex
from memaudit.errors import BadInput
from memaudit.roles import STR, obj
from memaudit.types import MemoryItem

REWRITE_SCHEMA = obj(memory_md=STR, history_entry=STR)
SPEAKER = {"task_start": "User (task)", "assistant": "Assistant", "user": "User"}


def sections(markdown: str) -> list[str]:
    """MEMORY.md cut before every heading line; text before the first heading is a section too."""
    parts: list[list[str]] = [[]]
    for line in markdown.splitlines():
        if line.startswith("#") and any(s.strip() for s in parts[-1]):
            parts.append([])
        parts[-1].append(line)
    return [text for text in ("\n".join(p).strip() for p in parts) if text]


class FileMemory(MemoryAdapter):
    name = "file_memory"
    ITEM_KINDS = {"memory_md": "note", "history_md": "episode"}
    prompts = ("memory_file_rewrite",)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.memory_md = ""
        self.history: list[dict] = []      # {"date": "task012", "text": ...} in order
        self.transcript: list[str] = []    # the current episode, for the rewrite call
        self.index = VectorIndex(self.embedder)

    async def observe(self, event: Event) -> None:
        if event.kind != "episode_end":
            self.transcript.append(f"{SPEAKER[event.kind]}: {event.text}")
            return
        date = f"task{event.task_index:03d}"
        data = await memory_call(self, "memory:file_rewrite", "memory_file_rewrite", schema=REWRITE_SCHEMA,
                                 max_tokens=1500, clock=event.clock,
                                 seed_parts=self.seed_parts(event.task_index, "rewrite"),
                                 memory_md=self.memory_md or "(empty)", transcript="\n\n".join(self.transcript),
                                 date=date)
        self.transcript = []
        if data is None:
            return
        self.memory_md = data["memory_md"].strip()
        if data["history_entry"].strip():
            self.history.append({"date": date, "text": data["history_entry"].strip()})
        await self._reindex()

    async def context(self, query: str, k: int) -> AgentContext:
        return AgentContext(preamble=self.memory_md)

    def dump(self) -> list[dict]:
        items = [{"id": f"memory.{n}", "content": text, "category": "memory_md"}
                 for n, text in enumerate(sections(self.memory_md))]
        items += [{"id": f"history.{n}", "content": f"[{h['date']}] {h['text']}", "category": "history_md",
                   "timestamp": h["date"]} for n, h in enumerate(self.history)]
        return items

    async def search(self, query: str, k: int) -> list[MemoryItem]:
        items = {item["id"]: item for item in self.dump()}
        return [as_memory_item(items[i], score) for i, score in await self.index.nearest(query, k)]

    def snapshot(self) -> dict:
        return deep_copy({**self.state_header(), "memory_md": self.memory_md, "history": self.history,
                          "transcript": self.transcript})

    async def restore(self, state: dict) -> None:
        state = deep_copy(state)
        self.load_header(state)
        self.memory_md, self.history, self.transcript = state["memory_md"], state["history"], state["transcript"]
        await self._reindex()

    async def load_items(self, items: list[dict]) -> None:
        memory, history = [], []
        for n, item in enumerate(items, 1):
            if not isinstance(item, dict) or not isinstance(item.get("content"), str):
                raise BadInput(f"memory {n} needs a string 'content'", field="content")
            if item.get("category") == "history_md":
                date = str(item.get("timestamp", ""))
                history.append({"date": date, "text": item["content"].removeprefix(f"[{date}] ")})
            else:
                memory.append(item["content"])
        self.memory_md, self.history = "\n\n".join(memory), history
        await self._reindex()

    async def _reindex(self) -> None:
        self.index.clear()
        await self.index.put([(item["id"], item["content"]) for item in self.dump()])
