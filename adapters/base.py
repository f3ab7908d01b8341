"""The memory-adapter protocol: what a memory system must implement to be audited.

A memory system sees only what the assistant scaffold hands it through `observe()`: it never sees
the hidden bank, the episode machinery or how it is graded. Everything an adapter needs from
outside comes in its AdapterContext: the shared model client (for memory-side LLM calls, under
the role `memory:<name>`), the cached embedder (`self.embedder` picks the one configured for the
adapter's `embed_role`), and a scope string for deterministic ids/seeds. A third-party library
that speaks the OpenAI API reaches the same client through `memaudit.llm.proxy`.

Write path:  observe(Event)      task_start -> assistant -> user -> assistant -> user ... -> episode_end
Read paths:  context(query, k)   what the assistant sees while replying; called with the latest
                                 user message BEFORE that message is observed (the published
                                 order, memaudit/rollout/episode.py: EpisodeMemory)
             search(query, k)    top-k items, each with `content`, a higher-is-better `score` (or None), native fields
             dump()              the whole store as a list of items with native fields
State:       snapshot()/restore() JSON-able state, saved after every episode, restored on resume
             close()             when the user is done (a library's worker process stops)

Every snapshot carries `write_failures` (memory-side calls that failed for good and whose write
was skipped, with `failure_log`), `embed_model` (the embedding model the store was built with)
and, where the model's window is known, `embed_truncated` (the texts it cut: `WindowCount`);
`state_header()` / `load_header()` write and check them.
"""
from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from memaudit.adapters.memory_calls import FailureLog
from memaudit.errors import BadInput
from memaudit.llm.client import LLM
from memaudit.llm.embed import Embedder
from memaudit.roles import AGENT, MEMORY, ROLE_SPECS
from memaudit.types import (EMBED_TRUNCATED, EMBED_TRUNCATED_TEXTS, KIND, SHORT_TERM_KINDS, USER_INGEST, MemoryItem,
                            footprint, for_reader)

EVENT_KINDS = ("task_start", "assistant", "user", "episode_end")


@dataclass(frozen=True)
class Event:
    kind: str          # one of EVENT_KINDS
    text: str          # task text, reply, user message; "" for episode_end
    task_index: int    # 1-based episode number
    turn: int          # assistant replies so far in this episode (0 for task_start)

    @property
    def clock(self) -> str:
        """A logical timestamp (never wall time): stable across replays."""
        return f"task{self.task_index:03d}.turn{self.turn:02d}"


@dataclass
class AgentContext:
    """What the assistant scaffold puts into the reply prompt besides the task and conversation."""
    notes: list[MemoryItem] = field(default_factory=list)   # shown as a memory block
    history: list[dict] = field(default_factory=list)      # earlier chat replayed before this task
    preamble: str = ""                                      # always-in-context memory text
    dropped: int = 0                                        # history messages dropped to fit the window
    # Positions in `history` the published longctx_full did not replay (each earlier episode's last
    # reply, which it never stored, and empty messages: docs/fidelity.md TF1, TF4); left out of the
    # request only under the published pack (memaudit/published/layout.py).
    published_omits: tuple[int, ...] = ()


@dataclass
class AdapterContext:
    llm: LLM | None            # None when a dumped store is only searched (no write path)
    embedder: Embedder
    scope: str                 # "<run>/<user_id>": namespace for ids and seeds
    agent_context_window: int | None = None
    ingest: str = USER_INGEST  # what a deployed library is given (INGEST_MODES)


class WindowCount:
    """An adapter's embedder, keeping the texts the embedding model's window cut for this system:
    every text it embeds, stored or searched, itself or through its library's calls to the
    recording proxy (which embeds with this). A cut text is embedded from its first tokens only,
    silently: counted, it is reported (Table 2, the rollout's output)."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self.cut: set[str] = set()  # hashes of the texts cut

    @property
    def model_name(self) -> str:
        return self.embedder.model_name

    @property
    def counted(self) -> bool:
        return self.embedder.window is not None

    async def embed(self, texts):
        self.cut.update(self.embedder.cut(texts) or ())
        return await self.embedder.embed(texts)

    def to_state(self) -> dict:
        if not self.counted:
            return {}
        return {EMBED_TRUNCATED: len(self.cut), EMBED_TRUNCATED_TEXTS: sorted(self.cut)}

    def load_state(self, state: dict) -> None:
        self.cut |= set(state.get(EMBED_TRUNCATED_TEXTS, ()))


class MemoryAdapter(ABC):
    name: ClassVar[str]
    supports_retrieve: ClassVar[bool] = True
    # Whether search results carry a higher-is-better score (False: they come in the system's own
    # order, each score None).
    scored: ClassVar[bool] = True
    # The assistant's prompt file for this system. The published study gave the systems that show
    # retrieved memories a prompt asking for replies tailored to the person, and the baselines
    # without such a block (nomem, longctx_full) a plain one: `agent_plain`.
    reply_prompt: ClassVar[str] = ROLE_SPECS[AGENT].prompt
    # The fields, in order, of one search result as the published system returned it to the scorer
    # (None: every field, `MemoryItem.to_json`). The retrieve reader sees results in this shape.
    result_fields: ClassVar[tuple[str, ...] | None] = None
    # Result fields the published scorer showed otherwise than this system gives them (its library's
    # search left them out): shown so under the published pack only.
    published_result: ClassVar[dict] = {}
    # Prompt files (`prompts/<name>.md`) of the memory-side calls; runs record their sha256.
    prompts: ClassVar[tuple[str, ...]] = ()
    # The configured role group whose embedding model this system uses.
    embed_role: ClassVar[str] = MEMORY
    # The distribution of a deployed library this system runs as it ships (None: memaudit's own
    # design); its version is recorded in each run's provenance.
    library: ClassVar[str | None] = None
    # A library instance per user that holds its store while the user runs (a worker process, an
    # embedded database: graphiti's Kuzu holds ~170 MB a user): at most --library-workers such
    # users are open at once in a command, so memory stays bounded however many users a study has.
    bounded_users: ClassVar[bool] = False
    # What each item the system stores is (memaudit.types.KIND), by the item's native `category`
    # (ITEM_KINDS), else ITEM_KIND; an item that says its own kind keeps it (`kind_of`). Added at
    # the adapter boundary to every search result and dump item (adapters/boundary.py).
    ITEM_KINDS: ClassVar[dict[str, str]] = {}
    ITEM_KIND: ClassVar[str | None] = None
    # Whether the system calls a model to write its memory. One that never does cannot lose a write
    # to a model failure: its snapshots keep no `write_failures` count and its tables say n/a.
    memory_calls: ClassVar[bool] = True
    # The item kinds (a dump item's `kind`) the system keeps only until it consolidates them into
    # its long-term store (a short-term queue): a run whose final stores hold nothing else never
    # wrote its long-term store (the health table, the rollout's summary). Snapshots record them.
    short_term_kinds: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, ctx: AdapterContext):
        self.ctx = ctx
        self._counter = 0
        self.failures = FailureLog()
        self._embedder: WindowCount | None = None

    @property
    def embedder(self) -> WindowCount:
        """The embedder configured for `embed_role`, counting the texts its window cuts."""
        if self._embedder is None:
            self._embedder = WindowCount(self.ctx.embedder.for_role(self.embed_role))
        return self._embedder

    @property
    def write_failures(self) -> int:
        """Memory-side writes lost to model failures so far (also `snapshot()["write_failures"]`)."""
        return self.failures.lost

    # -- write path ------------------------------------------------------------------------
    @abstractmethod
    async def observe(self, event: Event) -> None: ...

    # -- read paths ------------------------------------------------------------------------
    async def context(self, query: str, k: int) -> AgentContext:
        return AgentContext(notes=await self.search(query, k) if self.supports_retrieve else [])

    @abstractmethod
    async def search(self, query: str, k: int) -> list[MemoryItem]: ...

    @abstractmethod
    def dump(self) -> list[dict]: ...

    def kind_of(self, fields: dict) -> str | None:
        """What an item (its native fields) is: its own `kind`, else by its category, else ITEM_KIND."""
        return fields.get(KIND) or self.ITEM_KINDS.get(fields.get("category"), self.ITEM_KIND)

    def result_json(self, item: MemoryItem, *, published: bool = False) -> dict:
        """A search result as the retrieve reader is shown it (see `result_fields`; `published`: under
        the published pack, see `published_result`), without memaudit's `kind` (types.for_reader)."""
        out = for_reader({**item.to_json(), **self.published_result} if published else item.to_json())
        if self.result_fields is None:
            return out
        return {name: out[name] for name in self.result_fields if name in out}

    def footprint(self) -> tuple[int, float]:
        return footprint(self.dump())

    # -- state -----------------------------------------------------------------------------
    @abstractmethod
    def snapshot(self) -> dict: ...

    @abstractmethod
    async def restore(self, state: dict) -> None: ...

    async def close(self) -> None:
        """Release what the adapter holds beyond its state (a library's worker process): called
        when its user is done."""

    async def load_items(self, items: list[dict]) -> None:
        """Load a dumped store (published `memories.json` or our export) for `memory search`."""
        raise NotImplementedError(f"{self.name} cannot load a dumped store")

    @classmethod
    def library_release(cls) -> str | None:
        """"name==version" of the deployed library, or None."""
        if cls.library is None:
            return None
        from importlib.metadata import version

        return f"{cls.library}=={version(cls.library)}"

    def state_header(self) -> dict:
        """The part of every snapshot the base class owns."""
        header = {"counter": self._counter, "embed_model": self.embedder.model_name, **self.embedder.to_state()}
        if self.memory_calls:
            header.update(self.failures.to_state())
        if self.short_term_kinds:
            header[SHORT_TERM_KINDS] = sorted(self.short_term_kinds)
        return header

    def load_header(self, state: dict) -> None:
        """Restore what `state_header` wrote; a store built with another embedding model is refused
        (its vectors and every search over it would silently change)."""
        written = state.get("embed_model")
        if written is not None and written != self.embedder.model_name:
            raise BadInput(f"this {self.name} store was built with embedding model {written!r}, not "
                           f"{self.embedder.model_name!r}: pass --embed-model {written}", field="embed_model")
        self._counter = state.get("counter", 0)
        self.failures.load_state(state)
        self.embedder.load_state(state)

    # -- helpers for implementations -------------------------------------------------------
    def new_id(self, content: str) -> str:
        """Deterministic id from (scope, content, counter): no uuid4, stable under replay."""
        return self.id_digest(content)[:16]

    def id_digest(self, content: str) -> str:
        """The hex digest ids are cut from; each draw advances the counter."""
        self._counter += 1
        return hashlib.sha256(f"{self.ctx.scope}\x00{content}\x00{self._counter}".encode()).hexdigest()

    def seed_parts(self, *parts) -> tuple:
        return (self.ctx.scope, self.name, self._counter, *parts)
