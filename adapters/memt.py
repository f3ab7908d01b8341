"""`memt`: Mem-T, a policy model that maintains a hierarchical memory, as the published study
integrated it.

Collections: `turns` (the user's messages, "user said: …"), `facts`, `experiences`, `personas`
(one profile per person, keyed by name) and `summary` (one running summary). Every stored fact,
experience, persona and summary is its written document followed by the source turns it came from
(`SOURCE_HEADING`); the document alone is kept in `metadata.memory_content`, the turns in
`metadata.original_turns`.

Write path, for each message from the user (the task text and each reply; assistant replies are
never seen):
1. the turn is stored in `turns`;
2. a formation call sees the running summary, the personas ("Name: …, Profile: …") and the turn,
   and calls tools: create_fact, create_experience, update_persona (name + full profile),
   update_summary (full summary). A persona or the summary is replaced in place and gains the turn
   as a source;
3. each new fact or experience gets an update call against its up to 3 nearest items in its
   collection (the call is made with no neighbours too, as published); its operations are applied
   in order: add, update a neighbour (new document, the turn added to its sources), delete a
   neighbour, ignore. A neighbour index outside the list is logged in `bad_indices` and skipped.

Read path: a ReAct loop of at most 6 tool steps in which the policy picks a search tool and a
query (facts, experiences, turns: 5 hits; summary, personas: the best one) or finishes. Only items
carrying memory content are collected, so turns never surface. `search` returns the collected
items de-duplicated in the order found, their written documents, with no score; an early finish
(or a failed policy call) returns what was collected, possibly nothing. The assistant's `context`
sees up to 20 collected items, and only when nothing was collected the first 20 stored items cut
to 400 characters.

Every call uses the role `memt_policy:<step>`, so the policy can be its own endpoint. With our
prompts (`prompts/memory_memt_*.md`) any chat model follows a JSON tool protocol; with
`--memt-prompts DIR` the calls are built from Mem-T's own templates in the user's Mem-T checkout
(`adapters/memt_templates.py`), for the real Mem-T-4B policy."""
from __future__ import annotations

from memaudit.adapters.base import AgentContext, Event, MemoryAdapter
from memaudit.adapters.indexed import deep_copy
from memaudit.adapters.memory_calls import memory_call
from memaudit.adapters.vector_index import VectorIndex
from memaudit.errors import BadInput
from memaudit.llm.keys import text_hash
from memaudit.roles import MEMT_POLICY, NONEMPTY, REASON, STR, obj
from memaudit.types import MemoryItem

COLLECTIONS = ("turns", "facts", "experiences", "personas", "summary")
MEMORY_COLLECTIONS = COLLECTIONS[1:]
WRITE_TOOLS = {"create_fact": "facts", "create_experience": "experiences",
               "update_persona": "personas", "update_summary": "summary"}
SEARCH_TOOLS = {f"search_{name}": name for name in COLLECTIONS}
# Singular spellings a dumped store may use for its collections.
COLLECTION_ALIASES = {"turn": "turns", "fact": "facts", "experience": "experiences", "persona": "personas",
                      "summaries": "summary", **{name: name for name in COLLECTIONS}}
SOURCE_HEADING = "\n\n--- source turns ---\n"
SUMMARY_ID = "summary"
NEIGHBOURS = 3        # items an update call is shown
TOOL_HITS = 5         # hits of search_facts / search_experiences / search_turns
MAX_TOOL_STEPS = 6
CONTEXT_ITEMS = 20    # collected items the assistant sees
FALLBACK_CHARS = 400  # cut of the stored items shown when nothing was collected

FORMATION_SCHEMA = obj(tool_calls={"type": "array", "items": obj(
    tool={"type": "string", "enum": list(WRITE_TOOLS)}, name=STR, content=NONEMPTY)})
UPDATE_SCHEMA = obj(operations={"type": "array", "items": obj(
    op={"type": "string", "enum": ["add", "update", "delete", "ignore"]}, target={"type": "integer"},
    content=STR)})
# The thought is bounded: grammar-constrained small models otherwise ramble into the token limit.
SEARCH_SCHEMA = obj(thought=REASON, action={"type": "string", "enum": [*SEARCH_TOOLS, "finish"]}, query=STR)


def with_sources(document: str, turns: list[str]) -> str:
    return document + SOURCE_HEADING + "\n".join(turns) if turns else document


def memory_content(item: dict) -> str:
    """The written document of an item (a published dump keeps it in metadata.memory_content)."""
    meta = item.get("metadata") or {}
    return meta.get("memory_content") or item["content"].split(SOURCE_HEADING, 1)[0]


class OwnPolicy:
    """Our prompts and JSON tool protocol, for any chat model."""
    mode = "memaudit-prompts"

    async def formation(self, adapter, event: Event, summary: str, personas: str, turn: str) -> list[dict] | None:
        data = await memory_call(adapter, "memt_policy:formation", "memory_memt_formation", schema=FORMATION_SCHEMA,
                                 max_tokens=800, clock=event.clock,
                                 seed_parts=adapter.seed_parts(event.task_index, event.turn, "formation"),
                                 summary=summary or "(none yet)", personas=personas or "(none yet)", turn=turn)
        return None if data is None else data["tool_calls"]

    async def update(self, adapter, event: Event, collection: str, candidate: str,
                     neighbours: list[dict]) -> list[dict] | None:
        shown = "\n".join(f"[{n}] (extracted at {item['metadata'].get('turn_time', '')}) {memory_content(item)}"
                          for n, item in enumerate(neighbours)) or "(none)"
        data = await memory_call(adapter, "memt_policy:update", "memory_memt_update", schema=UPDATE_SCHEMA,
                                 max_tokens=600, clock=event.clock,
                                 seed_parts=adapter.seed_parts(event.task_index, event.turn, "update", candidate),
                                 collection=collection, candidate=f"(extracted at {event.clock}) {candidate}",
                                 neighbours=shown)
        if data is None:
            return None
        operations = []
        for op in data["operations"]:
            target = None
            if op["op"] in ("update", "delete"):
                if not 0 <= op["target"] < len(neighbours):
                    adapter.bad_indices.append({"clock": event.clock, "decision": op["op"], "index": op["target"]})
                    continue
                target = neighbours[op["target"]]["id"]
            operations.append({"op": op["op"], "target": target, "content": op["content"].strip()})
        return operations

    def searcher(self, adapter, query: str) -> "OwnSearch":
        return OwnSearch(adapter, query)


class OwnSearch:
    """One ReAct search with our prompt: earlier steps are shown as text in each step's prompt."""

    def __init__(self, adapter, query: str):
        self.adapter, self.query, self.steps = adapter, query, []

    async def next(self, step: int, observation: str | None) -> tuple[str, dict] | None:
        """The next (tool, arguments), or None to stop (finish, or a failed call)."""
        if observation is not None:
            self.steps[-1] += "\n" + observation
        data = await memory_call(self.adapter, "memt_policy:search", "memory_memt_search", schema=SEARCH_SCHEMA,
                                 max_tokens=300, clock="search",
                                 seed_parts=self.adapter.seed_parts("search", text_hash(self.query), step),
                                 query=self.query, observations="\n\n".join(self.steps) or "(none yet)",
                                 steps_left=MAX_TOOL_STEPS - step)
        if data is None or data["action"] == "finish":
            return None
        self.steps.append(f"{data['action']}({data['query']!r}):")
        return data["action"], {"query": data["query"].strip()}


class MemT(MemoryAdapter):
    name = "memt"
    ITEM_KINDS = {"turns": "message", "facts": "fact", "experiences": "experience", "personas": "persona",
                  "summary": "summary"}
    result_fields = ("id", "content", "category", "score", "timestamp")
    published_result = {"score": None}  # Mem-T's search returns no score; the scorer showed null
    scored = False
    prompts = ("memory_memt_formation", "memory_memt_update", "memory_memt_search")
    embed_role = MEMT_POLICY
    # An item's written document, for the policies (memt_templates.py reads it here: no import back)
    document = staticmethod(memory_content)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.collections: dict[str, dict[str, dict]] = {name: {} for name in COLLECTIONS}
        self.indexes = {name: VectorIndex(self.embedder) for name in COLLECTIONS}
        self.bad_indices: list[dict] = []
        self.turn_count = 0
        templates = ctx.llm.settings.memt_prompts if ctx.llm is not None else None
        if templates is not None:
            from memaudit.adapters.memt_templates import TemplatePolicy
            self.policy = TemplatePolicy(templates)
        else:
            self.policy = OwnPolicy()

    # -- write path --------------------------------------------------------------------------
    async def observe(self, event: Event) -> None:
        if event.kind not in ("task_start", "user"):
            return
        self.turn_count += 1
        turn_id, turn = f"t{self.turn_count:04d}", f"user said: {event.text}"
        await self._put("turns", {"id": turn_id, "content": turn, "category": "turns", "timestamp": event.clock,
                                  "metadata": {"turn_time": event.clock, "source_turn_ids": [[turn_id]]}})
        calls = await self.policy.formation(self, event, self._summary_text(), self._personas_text(), turn)
        for call in calls or []:
            collection = WRITE_TOOLS[call["tool"]]
            document = call["content"].strip()
            if not document:
                continue
            if collection == "summary":
                await self._replace(SUMMARY_ID, "summary", document, event, turn_id, turn)
            elif collection == "personas":
                if call["name"].strip():  # a profile without a name is dropped, as Mem-T's tool does
                    await self._replace(call["name"].strip(), "personas", document, event, turn_id, turn)
            else:
                await self._update(collection, document, event, turn_id, turn)

    def _summary_text(self) -> str:
        summary = self.collections["summary"].get(SUMMARY_ID)
        return memory_content(summary) if summary else ""

    def _personas_text(self) -> str:
        return "\n".join(f"Name: {name}, Profile: {memory_content(item)}"
                         for name, item in self.collections["personas"].items())

    async def _replace(self, item_id: str, collection: str, document: str, event: Event, turn_id: str,
                       turn: str) -> None:
        """A persona or the summary: one item, rewritten in place, gaining the turn as a source."""
        old = self.collections[collection].get(item_id)
        meta = old["metadata"] if old else {"original_turns": [], "source_turn_ids": [], "ops": []}
        meta["original_turns"].append(turn)
        meta["source_turn_ids"].append([turn_id])
        meta["ops"].append("update" if old else "create")
        meta.update(memory_content=document, turn_time=event.clock)
        if collection == "personas":
            meta["name"] = item_id
        await self._put(collection, {"id": item_id, "content": with_sources(document, meta["original_turns"]),
                                     "category": collection, "timestamp": event.clock, "metadata": meta})

    async def _update(self, collection: str, candidate: str, event: Event, turn_id: str, turn: str) -> None:
        items = self.collections[collection]
        neighbours = [items[i] for i, _ in await self.indexes[collection].nearest(candidate, NEIGHBOURS)]
        operations = await self.policy.update(self, event, collection, candidate, neighbours)
        for op in operations or []:
            if op["op"] == "add":
                document = op["content"] or candidate
                meta = {"memory_content": document, "original_turns": [turn], "source_turn_ids": [[turn_id]],
                        "ops": ["add"], "turn_time": event.clock}
                await self._put(collection, {"id": self.new_id(document), "content": with_sources(document, [turn]),
                                             "category": collection, "timestamp": event.clock, "metadata": meta})
            elif op["op"] == "update" and op["target"] in items and op["content"]:
                item = items[op["target"]]
                meta = item["metadata"]
                if turn not in meta["original_turns"]:
                    meta["original_turns"].append(turn)
                meta["source_turn_ids"].append([turn_id])
                meta["ops"].append("update")
                meta.update(memory_content=op["content"], turn_time=event.clock)
                item.update(content=with_sources(op["content"], meta["original_turns"]), timestamp=event.clock)
                await self._put(collection, item)
            elif op["op"] == "delete" and op["target"] in items:
                del items[op["target"]]
                self.indexes[collection].remove(op["target"])

    async def _put(self, collection: str, item: dict) -> None:
        """Add or replace an item (a replaced item keeps its place); its index text is its content."""
        self.collections[collection][item["id"]] = item
        await self.indexes[collection].put([(item["id"], item["content"])])

    # -- read paths --------------------------------------------------------------------------
    async def search(self, query: str, k: int) -> list[MemoryItem]:
        found, seen = [], set()
        for item in await self._collect(query):
            if item.id not in seen:
                seen.add(item.id)
                found.append(item)
        return found[:k]

    async def context(self, query: str, k: int) -> AgentContext:
        # As published: empty documents dropped first, then the first 20 kept; only when none is
        # left, the first 20 stored items (cut first: there an empty line is dropped when shown).
        collected = [item for item in await self._collect(query) if item.content]
        if collected:
            return AgentContext(notes=collected[:CONTEXT_ITEMS])
        return AgentContext(notes=[MemoryItem(item["id"], item["content"][:FALLBACK_CHARS], None,
                                              {"category": item["category"]})
                                   for item in self.dump()[:CONTEXT_ITEMS]])

    async def _collect(self, query: str) -> list[MemoryItem]:
        """Run the ReAct loop; the memory items its searches surfaced, in order, repeats included."""
        if self.ctx.llm is None:
            return []
        collected: list[MemoryItem] = []
        seen_turns: set[str] = set()  # source turns already shown in this search
        searcher = self.policy.searcher(self, query)
        observation = None
        for step in range(MAX_TOOL_STEPS):
            chosen = await searcher.next(step, observation)
            if chosen is None:
                break
            tool, args = chosen
            if tool not in SEARCH_TOOLS:  # an answer without a usable tool call spends the step
                observation = "(no tool call found: call exactly one of the tools)"
                continue
            hits = await self._run_tool(SEARCH_TOOLS[tool], args)
            observation = self._observe(tool, hits, seen_turns)
            collected += [MemoryItem(item["id"], memory_content(item), None,
                                     {"category": item["category"], "timestamp": item.get("timestamp")})
                          for item in hits if item["category"] != "turns"]
        return collected

    async def _run_tool(self, collection: str, args: dict) -> list[dict]:
        items, query = self.collections[collection], args.get("query", "")
        if collection == "personas" and args.get("name"):
            return [items[args["name"]]] if args["name"] in items else []
        if collection == "summary" and not query:
            return list(items.values())[:1]
        if not query:
            return []
        hits = TOOL_HITS if collection in ("facts", "experiences", "turns") else 1
        return [items[i] for i, _ in await self.indexes[collection].nearest(query, hits)]

    @staticmethod
    def _observe(tool: str, hits: list[dict], seen_turns: set[str]) -> str:
        """What the policy is shown of a step's hits: documents, then source turns not yet shown."""
        if not hits:
            return "(nothing found)"
        lines, new_turns = [], []
        for item in hits:
            if item["category"] == "turns":
                if item["content"] not in seen_turns:
                    seen_turns.add(item["content"])
                    new_turns.append(item["content"])
                continue
            lines.append(f"- (extracted at {item['metadata'].get('turn_time', '')}) {memory_content(item)}")
            for turn in item["metadata"].get("original_turns", []):
                if turn not in seen_turns:
                    seen_turns.add(turn)
                    new_turns.append(turn)
        if new_turns:
            lines.append("source turns not shown before:" if lines else "turns:")
            lines += [f"  {turn}" for turn in new_turns]
        return "\n".join(lines) or "(only turns already shown)"

    def dump(self) -> list[dict]:
        return deep_copy([item for name in COLLECTIONS for item in self.collections[name].values()])

    # -- state -------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        return deep_copy({**self.state_header(), "policy": self.policy.mode, "collections": self.collections,
                          "bad_indices": self.bad_indices, "turn_count": self.turn_count})

    async def restore(self, state: dict) -> None:
        state = deep_copy(state)
        self.load_header(state)
        self.bad_indices, self.turn_count = state["bad_indices"], state["turn_count"]
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
            item["metadata"] = item.get("metadata") or {}
            grouped[item["category"]].append(item)
        self.turn_count = len(grouped["turns"])
        await self._fill(grouped)

    async def _fill(self, grouped: dict[str, list[dict]]) -> None:
        for name in COLLECTIONS:
            self.collections[name] = {item["id"]: item for item in grouped[name]}
            self.indexes[name].clear()
            await self.indexes[name].put([(item["id"], item["content"]) for item in grouped[name]])
