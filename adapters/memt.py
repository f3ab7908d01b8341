"""`memt`: Mem-T, a policy model that maintains typed memory collections.

Collections: `turns` (every message verbatim), `facts`, `experiences`, `personas` (one persona
description, rewritten as it grows) and `summary` (one running summary per task).

Write path, for each message from the user (the task text and each reply):
1. a formation call sees the newest exchange, the persona and the task's summary, and emits JSON
   tool calls: create_fact, create_experience, update_persona, update_summary;
2. each new fact or experience is compared with its 3 nearest items in its collection by an update
   call: add it, update a neighbour (merge), delete a neighbour (only when the new item explicitly
   negates it; the new item is then added) or ignore it as a duplicate. With no neighbours yet it is
   added without a call. A neighbour index outside the list is logged in `bad_indices` and skipped.

Read path: a ReAct loop in which the policy picks one of the five search tools and a query per
step (at most 6 steps) or finishes; the items collected are de-duplicated and the top-k returned,
re-scored by cosine to the original query so scores from different steps are comparable. If the
first policy step fails (or no model is attached, as when a dumped store is searched offline), all
collections are searched directly with the query; the failure is counted.

Every call uses the role `memt_policy:<step>`, so the policy can be its own endpoint (a vLLM server
hosting Mem-T-4B) or any chat model following the same JSON tool protocol."""
from __future__ import annotations

from memaudit.adapters.base import Event, MemoryAdapter
from memaudit.adapters.indexed import as_memory_item, deep_copy
from memaudit.adapters.longctx_full import prefixed
from memaudit.adapters.memory_calls import FailureLog, memory_call
from memaudit.adapters.vector_index import VectorIndex
from memaudit.errors import BadInput
from memaudit.llm.cache import text_hash
from memaudit.roles import NONEMPTY, STR, obj
from memaudit.types import MemoryItem

COLLECTIONS = ("turns", "facts", "experiences", "personas", "summary")
WRITE_TOOLS = {"create_fact": "facts", "create_experience": "experiences",
               "update_persona": "personas", "update_summary": "summary"}
SEARCH_TOOLS = {f"search_{name}": name for name in COLLECTIONS}
# Singular spellings a dumped store may use for its collections.
COLLECTION_ALIASES = {"turn": "turns", "fact": "facts", "experience": "experiences", "persona": "personas",
                      "summaries": "summary", **{name: name for name in COLLECTIONS}}
NEIGHBOURS = 3
MAX_SEARCH_STEPS = 6

FORMATION_SCHEMA = obj(tool_calls={"type": "array", "items": obj(
    tool={"type": "string", "enum": list(WRITE_TOOLS)}, content=NONEMPTY)})
UPDATE_SCHEMA = obj(decision={"type": "string", "enum": ["add", "update", "delete", "ignore"]},
                    target={"type": "integer"}, content=STR)
SEARCH_SCHEMA = obj(action={"type": "string", "enum": [*SEARCH_TOOLS, "finish"]}, query=STR)


class MemT(MemoryAdapter):
    name = "memt"
    prompts = ("memory_memt_formation", "memory_memt_update", "memory_memt_search")

    def __init__(self, ctx):
        super().__init__(ctx)
        self.collections: dict[str, dict[str, dict]] = {name: {} for name in COLLECTIONS}
        self.indexes = {name: VectorIndex(ctx.embedder) for name in COLLECTIONS}
        self.failures = FailureLog()
        self.bad_indices: list[dict] = []
        self.last_reply = ""

    # -- write path --------------------------------------------------------------------------
    async def observe(self, event: Event) -> None:
        if event.kind == "episode_end":
            self.last_reply = ""  # so a task opens without an earlier reply
            return
        await self._add("turns", prefixed(event), event, op="observe")
        if event.kind == "assistant":
            self.last_reply = event.text
        else:  # the user's words: the task text or a reply
            await self._form(event)

    async def _form(self, event: Event) -> None:
        persona = self._persona()
        summary = self._summary_of(event.task_index)
        data = await memory_call(self, "memt_policy:formation", "memory_memt_formation", schema=FORMATION_SCHEMA,
                                 max_tokens=800, clock=event.clock,
                                 seed_parts=self.seed_parts(event.task_index, event.turn, "formation"),
                                 persona=persona["content"] if persona else "(none yet)",
                                 summary=summary["content"] if summary else "(none yet)",
                                 previous_reply=self.last_reply or "(none)", message=event.text)
        for call in data["tool_calls"] if data else []:
            collection = WRITE_TOOLS[call["tool"]]
            if collection == "personas":
                await self._rewrite(persona, "personas", call["content"], event)
                persona = self._persona()
            elif collection == "summary":
                await self._rewrite(summary, "summary", call["content"], event)
                summary = self._summary_of(event.task_index)
            else:
                await self._update(collection, call["content"], event)

    def _persona(self) -> dict | None:
        return next(iter(self.collections["personas"].values()), None)

    def _summary_of(self, task_index: int) -> dict | None:
        return next((s for s in self.collections["summary"].values()
                     if s["metadata"].get("task_index") == task_index), None)

    async def _update(self, collection: str, content: str, event: Event) -> None:
        neighbours = [i for i, _ in await self.indexes[collection].nearest(content, NEIGHBOURS)]
        if not neighbours:
            await self._add(collection, content, event, op="add")
            return
        items = self.collections[collection]
        shown = "\n".join(f"[{n}] {items[i]['content']}" for n, i in enumerate(neighbours))
        data = await memory_call(self, "memt_policy:update", "memory_memt_update", schema=UPDATE_SCHEMA,
                                 max_tokens=400, clock=event.clock,
                                 seed_parts=self.seed_parts(event.task_index, event.turn, "update", content),
                                 collection=collection, neighbours=shown, candidate=content)
        if data is None or data["decision"] == "ignore":
            return
        if data["decision"] == "add":
            await self._add(collection, content, event, op="add")
            return
        if not 0 <= data["target"] < len(neighbours):
            self.bad_indices.append({"clock": event.clock, "decision": data["decision"], "index": data["target"]})
            return
        target = items[neighbours[data["target"]]]
        if data["decision"] == "update":
            await self._rewrite(target, collection, data["content"].strip() or content, event)
        else:
            del items[target["id"]]
            self.indexes[collection].remove(target["id"])
            await self._add(collection, content, event, op=f"add_after_delete:{target['id']}")

    async def _add(self, collection: str, content: str, event: Event, *, op: str) -> dict:
        metadata = {"task_index": event.task_index, "source_turns": [event.clock], "ops": [op],
                    "created": event.clock, "updated": event.clock}
        item = {"id": self.new_id(content), "content": content, "category": collection, "metadata": metadata}
        self.collections[collection][item["id"]] = item
        await self.indexes[collection].put([(item["id"], content)])
        return item

    async def _rewrite(self, item: dict | None, collection: str, content: str, event: Event) -> None:
        if item is None:
            await self._add(collection, content, event, op="create")
            return
        item["content"] = content
        meta = item["metadata"]
        meta["ops"].append("update")
        meta["updated"] = event.clock
        if event.clock not in meta["source_turns"]:
            meta["source_turns"].append(event.clock)
        await self.indexes[collection].put([(item["id"], content)])

    # -- read paths --------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        collected: list[tuple[str, str]] = []  # (collection, id), first time seen
        if self.ctx.llm is not None:
            await self._react(query, k, collected)
        if not collected:
            collected = [(name, i) for name in COLLECTIONS for i, _ in await self.indexes[name].nearest(query, k)]
        items = [self.collections[name][item_id] for name, item_id in collected]
        vector = await self.indexes["turns"].query_vector(query)
        scores = await self.ctx.embedder.embed([item["content"] for item in items]) @ vector
        ranked = sorted(zip(scores.tolist(), items), key=lambda pair: -pair[0])  # stable: ties keep order found
        return [as_memory_item(item, score) for score, item in ranked[:k]]

    async def _react(self, query: str, k: int, collected: list) -> None:
        observations: list[str] = []
        for step in range(MAX_SEARCH_STEPS):
            data = await memory_call(self, "memt_policy:search", "memory_memt_search", schema=SEARCH_SCHEMA,
                                     max_tokens=200, clock="search",
                                     seed_parts=self.seed_parts("search", text_hash(query), step),
                                     query=query, observations="\n\n".join(observations) or "(no searches yet)",
                                     steps_left=MAX_SEARCH_STEPS - step)
            if data is None or data["action"] == "finish":
                return
            name = SEARCH_TOOLS[data["action"]]
            sub_query = data["query"].strip() or query
            hits = await self.indexes[name].nearest(sub_query, k)
            for item_id, _ in hits:
                if (name, item_id) not in collected:
                    collected.append((name, item_id))
            lines = "\n".join(f"- {self.collections[name][i]['content']}" for i, _ in hits) or "- (nothing found)"
            observations.append(f"{data['action']}({sub_query!r}):\n{lines}")

    def dump(self) -> list[dict]:
        return deep_copy([item for name in COLLECTIONS for item in self.collections[name].values()])

    # -- state -------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        return deep_copy({"counter": self._counter, "collections": self.collections,
                          "bad_indices": self.bad_indices, "last_reply": self.last_reply,
                          **self.failures.to_state()})

    async def restore(self, state: dict) -> None:
        state = deep_copy(state)
        self._counter = state["counter"]
        self.bad_indices, self.last_reply = state["bad_indices"], state["last_reply"]
        self.failures.load_state(state)
        await self._fill({name: list(state["collections"][name].values()) for name in COLLECTIONS})

    async def load_items(self, items: list[dict]) -> None:
        grouped: dict[str, list[dict]] = {name: [] for name in COLLECTIONS}
        for n, raw in enumerate(items, 1):
            if not isinstance(raw, dict) or not isinstance(raw.get("content"), str):
                raise BadInput(f"memory {n} needs a string 'content'", field="content")
            collection = COLLECTION_ALIASES.get(raw.get("category"))
            if collection is None:
                raise BadInput(f"memory {n} has category {raw.get('category')!r}; expected one of "
                               f"{', '.join(COLLECTIONS)}", field="category")
            item = {key: value for key, value in raw.items() if key != "score"}
            item["category"] = collection
            item["id"] = str(item["id"]) if item.get("id") is not None else self.new_id(item["content"])
            item.setdefault("metadata", {})
            grouped[item["category"]].append(item)
        await self._fill(grouped)

    async def _fill(self, grouped: dict[str, list[dict]]) -> None:
        for name in COLLECTIONS:
            self.collections[name] = {item["id"]: item for item in grouped[name]}
            self.indexes[name].clear()
            await self.indexes[name].put([(item["id"], item["content"]) for item in grouped[name]])
