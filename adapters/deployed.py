"""`DeployedLibrary`: the base of every adapter over a deployed memory library (mem0ai, graphiti,
llamaindex, langmem, cognee), owning what they all do the same way, so that a library's adapter
writes only what is its own:

    TELEMETRY = {"SOMELIB_TELEMETRY": "false"}
    with upstream_imports("somelib", telemetry=TELEMETRY):   # a missing extra: one line naming it
        import somelib
    quiet_loggers({"somelib": logging.ERROR})
    patch_modules("somelib")                                  # its ids and times: the logical clock

    class SomeLib(ReplayedMessages, DeployedLibrary):         # or RefilledStore, or its own state
        name, library = "somelib", "somelib"                  # the system; the distribution in provenance
        TELEMETRY = TELEMETRY
        CALLS_PER_MESSAGE = 2.0                               # measured on the contract's fake
        async def open(self, endpoint): ...                   # the library at the proxy's endpoint
        async def add(self, event): ...                       # one user message
        async def search(self, query, k): ...
        def dump(self): ...
        @classmethod
        def card_rows(cls): ...                               # its own configuration-card rows

The base gives it: the role `memory:<name>` (ROLE), the recording proxy's endpoint (`Endpoint`:
chat and embeddings at one base URL, the model configured for the role, the embedding model, no
client retries, a long timeout; `dimensions()`), `observe` fed only what the published study gave a
library (`SOURCE`: the task text and each user reply) on the episode's logical clock (`self.clock`),
guarded library calls whose model failures are counted write failures (`guarded`), the declared
facts that tests, `plan` and the contract read, and the configuration card's base rows
(`configuration()`: the endpoint, telemetry, the clock, retries; then the library's `card_rows()`).
Its state: `RefilledStore` (the dump, refilled) or `ReplayedMessages` (the messages, added again)."""
from __future__ import annotations

import logging
import os
from abc import abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, ClassVar

from memaudit.adapters.base import Event, MemoryAdapter
from memaudit.adapters.card import CardRow
from memaudit.adapters.indexed import deep_copy
from memaudit.adapters.library_clock import LibraryClock
from memaudit.adapters.registry import available, get_adapter, install_hint
from memaudit.adapters.upstream import PROXY_KEY, PROXY_TIMEOUT, embedding_dimensions, guarded, library_route
from memaudit.errors import BadInput, MemauditError
from memaudit.roles import MEMORY
from memaudit.types import EXCHANGE_INGEST


@contextmanager
def upstream_imports(system: str, *, extra: str | None = None, telemetry: dict[str, str] | None = None):
    """The imports of a library's adapter module: its telemetry switched off first (libraries read
    the switch when imported), and a missing library one line naming the extra that brings it
    (`extra`: the system's name unless said), raised when the module is imported, before a run is
    opened."""
    os.environ.update(telemetry or {})
    try:
        yield
    except ImportError as exc:
        raise BadInput(f"the {system} system needs the upstream library ({exc}): {install_hint(extra or system)}",
                       field="systems") from None


def quiet_loggers(levels: dict[str, int]) -> None:
    """A library's own log lines (notices, the errors it also raises) below these levels are not
    printed: every command's output stays one line a fact, and each failure still reaches the
    adapter as an exception, counted."""
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@dataclass(frozen=True)
class Endpoint:
    """Where a library's model and embedding calls go: the adapter's route of the recording proxy,
    serving both at one OpenAI-compatible base URL."""
    base_url: str
    model: str        # the model configured for the library's role
    embed_model: str  # memaudit's embedding model for the system
    key: str = PROXY_KEY
    timeout: float = PROXY_TIMEOUT
    # memaudit's client retries (and its call cache answers a repeated failure alike): a library's
    # own retries would only send the same request again.
    max_retries: int = 0


class DeployedLibrary(MemoryAdapter):
    # -- declared facts (class attributes; tests, `plan`, the contract and provenance read them) --
    EXTRA: ClassVar[str]  # the extra that installs the library: the system's name unless declared
    TELEMETRY: ClassVar[dict[str, str]] = {}  # the variables that switch its telemetry off, and their values
    TOOL_CALLING: ClassVar[bool] = False  # writes by tool calls (its first call is the endpoint's tool check)
    QUEUED_WRITES: ClassVar[bool] = False  # a message goes to a short-term queue first (no model call each)
    # Its write is a free-text answer it parses itself: one it cannot use fails inside the library (its
    # own error, counted), never memaudit's InvalidOutput.
    PARSES_FREE_TEXT: ClassVar[bool] = False
    # Memory-side model calls per user message, as measured on the contract's fake (what `plan`
    # estimates a study with before a pilot measures it).
    CALLS_PER_MESSAGE: ClassVar[float]
    ENVIRONMENT: ClassVar[str | None] = None  # None: the library runs in memaudit's own environment
    bounded_users = True  # (MemoryAdapter) its store per user, in this process or a worker
    # What the published study gave a library: each message from the user (the task text and each reply).
    SOURCE: ClassVar[tuple[str, ...]] = ("task_start", "user")
    ROLE: ClassVar[str]  # `memory:<name>`, derived

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" in vars(cls):
            cls.ROLE = f"{MEMORY}:{cls.name}"
            cls.EXTRA = vars(cls).get("EXTRA", cls.name)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.instance = None  # the library, opened on first use (`opened`)
        self.route = None     # this adapter's route of the recording proxy
        self.clock = LibraryClock(ctx.scope)
        self.reply: str | None = None  # the assistant reply the next user message answers (None: a task's text)

    # -- the library -----------------------------------------------------------------------------
    @abstractmethod
    async def open(self, endpoint: Endpoint):
        """The library instance of this adapter (one per user), its calls at `endpoint`."""

    async def opened(self):
        if self.instance is None:
            self.route = await library_route(self, self.ROLE)
            self.instance = await self.open(Endpoint(self.route.base_url, self.ctx.llm.settings.role(self.ROLE).model,
                                                     self.embedder.model_name))
        return self.instance

    async def dimensions(self) -> int:
        """The length of the adapter's vectors, which a library's vector store is configured with."""
        return await embedding_dimensions(self)

    async def guarded(self, call: Callable):
        """A library call (a coroutine function of no arguments) on the logical clock, its model
        calls counted with the caller's artifact; a model failure is a counted write failure and
        gives None (adapters/upstream.py `guarded`)."""
        return await guarded(self, self.ROLE, self.route, call)

    # -- write path ------------------------------------------------------------------------------
    async def observe(self, event: Event) -> None:
        if event.kind in ("task_start", "assistant"):  # only an exchange gives the library the reply
            self.reply = event.text if event.kind == "assistant" and self.ctx.ingest == EXCHANGE_INGEST else None
        if event.kind not in self.SOURCE:
            return
        self.clock.at(event)
        await self.add(event)

    @abstractmethod
    async def add(self, event: Event) -> None:
        """Give the library one user message (the clock is at its moment): `self.said(event)`."""

    def said(self, event: Event) -> list[dict]:
        """The messages a user message is given to the library as (chat roles and text): the user's
        alone, or under `--ingest exchange` after the assistant reply it answers (a task's text
        answers none)."""
        user = {"role": "user", "content": event.text}
        if self.reply is None:
            return [user]
        return [{"role": "assistant", "content": self.reply}, user]

    def said_text(self, event: Event) -> str:
        """`said` as one text, for a library that adds documents, not conversations: the message
        alone, or each message a paragraph after its role."""
        said = self.said(event)
        return event.text if len(said) == 1 else "\n\n".join(f"{m['role']}: {m['content']}" for m in said)

    # -- the configuration card ------------------------------------------------------------------
    @classmethod
    def configuration(cls) -> list[CardRow]:
        """Every setting memaudit passes to the library or patches in it (adapters/card.py): what
        every deployed library is given alike, then the library's own rows."""
        telemetry = ", ".join(f"{name}={value}" for name, value in cls.TELEMETRY.items())
        return [
            CardRow("model", "the library's default provider", f"the recording proxy, role {cls.ROLE}",
                    "every call cached, counted and replayable, sent to the model configured for the role"),
            CardRow("embedder", "the library's default provider", "memaudit's embedder through the proxy",
                    "every system embeds with the same model, its vectors cached"),
            CardRow("telemetry", "the library's default", f"off ({telemetry})" if telemetry else "none sent",
                    "no network but loopback"),
            CardRow("ids and times", "uuid4 and wall time", "the episode's logical clock",
                    "deterministic stored items: a replay is identical"),
            CardRow("client retries", "the client's own", f"{Endpoint.max_retries} (memaudit's client retries)",
                    "a retried request is answered from the call cache alike"),
            CardRow("client timeout", "the client's own", f"{PROXY_TIMEOUT:.0f} s",
                    "the proxy answers once memaudit's client has, with its own timeouts"),
            *cls.card_rows(),
        ]

    @classmethod
    def card_rows(cls) -> list[CardRow]:
        """The library's own rows of its configuration card."""
        return []

    # -- the contract's fake model (a test double: memaudit/testing/adapter_contract.py) ----------
    @staticmethod
    def fake_answer(body: dict) -> object | None:
        """The fake model's answer to a structured call of this library's role, spoken as a model
        would answer the library's prompt (None: the fake's answer from the schema)."""
        return None

    @staticmethod
    def fake_text(body: dict) -> str | None:
        """The fake model's answer to a free-text call this library makes (None: not this library's)."""
        return None

    @staticmethod
    def fake_tool_calls(request, messages: list[dict]) -> list[tuple[str, dict]] | None:
        """The fake model's tool calls, as (name, arguments) pairs, answering a request of this
        library that offers tools (a ToolRequest, natively or emulated alike; [] answers in words,
        None: not this library's)."""
        return None

    @staticmethod
    def fake_json(body: dict) -> object | None:
        """The fake model's answer to a `json_object` call (no schema: the library's prompt gives the
        format) this library makes (None: not this library's)."""
        return None

    # A test's injected fault meets a write's first request by default. A library that sends a
    # write's requests at once (in an order that depends on scheduling) picks the request that
    # fails by its body instead.
    faulted_request: ClassVar[Callable[[dict], bool] | None] = None
    # How often the library itself asks again after an answer it cannot use, each time a new request
    # (its messages grown by the error): a faulted write's requests are these times more.
    OWN_RETRIES: ClassVar[int] = 0


def registered_libraries() -> dict[str, type[DeployedLibrary]]:
    """The registered systems that are deployed libraries and load here (one whose library is not
    installed does not), by name."""
    from memaudit.adapters.registry import available, get_adapter

    found = {}
    for name in available():
        try:
            adapter = get_adapter(name)
        except MemauditError:
            continue
        if isinstance(adapter, type) and issubclass(adapter, DeployedLibrary):
            found[name] = adapter
    return found


# docs/adapters.md's table of the deployed libraries lies between these lines (scripts/library_table.py
# writes it; tests/adapters/test_deployed.py checks it).
TABLE_START = "<!-- the deployed libraries, from their adapters' declarations: scripts/library_table.py -->"
TABLE_END = "<!-- end of the generated table -->"


def library_table(libraries: dict[str, type[DeployedLibrary]]) -> str:
    """The markdown table of deployed libraries, one row each, from what their adapters declare."""
    rows = ["| system | library | extra | environment | memory calls per user message | writes by tool calls "
            "| writes queued first |", "|---|---|---|---|---:|---|---|"]
    for name, adapter in sorted(libraries.items()):
        rows.append(f"| `{name}` | {adapter.library_release()} | `{adapter.EXTRA}` | "
                    f"{adapter.ENVIRONMENT or 'memaudit'} | {adapter.CALLS_PER_MESSAGE:g} | "
                    f"{'yes' if adapter.TOOL_CALLING else 'no'} | {'yes' if adapter.QUEUED_WRITES else 'no'} |")
    return "\n".join(rows)


def request_schema(body: dict) -> dict:
    """The output schema of a chat-completions request body ({} for free text)."""
    format_ = body.get("response_format") or {}
    return (format_.get("json_schema") or format_).get("schema") or {}


class RefilledStore:
    """For a DeployedLibrary whose store takes back what it dumped (`_refill(items)`, items as
    `dump()` lists them): its state is that dump (`self.stored`) and the clock."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.stored: list[dict] = []  # the dump, read back from the library after every change

    def dump(self) -> list[dict]:
        return deep_copy(self.stored)

    def snapshot(self) -> dict:
        return deep_copy({**self.state_header(), "clock": self.clock.to_state(), "stored": self.stored})

    async def restore(self, state: dict) -> None:
        state = deep_copy(state)
        self.load_header(state)
        self.clock.load_state(state["clock"])
        await self._refill(state["stored"])
        # Where the first run's clock stood: the refill puts back recorded ids, and whatever ids
        # the library drew meanwhile (uuid4 patched process-wide by another adapter) are not the
        # first run's draws.
        self.clock.load_state(state["clock"])


class ReplayedMessages:
    """For a DeployedLibrary whose store has no form the library reads back (a graph database,
    another process): its state is the messages it was given, added again in order on restore,
    every call answered from the cache. The snapshot's failure counts and clock are the first
    run's: replayed failures are not counted twice."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.added: list[list] = []  # [clock, task index, turn, text] of every message given to it
        # The clock's state as each message found it: a restore adds the message again from there,
        # so it draws the same ids whatever the library drew between two messages (cognee: a
        # search's). Kept apart from `added`, whose shape older snapshots share.
        self.added_clocks: list[dict | None] = []  # None: a message restored from such an older snapshot
        self.stored: list[dict] = []  # the dump, read back from the library after every change

    async def observe(self, event: Event) -> None:
        if event.kind in self.SOURCE:
            # Under --ingest exchange, the reply it answers (a state without it: the user's alone),
            # which a restore gives it again whatever the restoring command's ingest.
            reply = self.reply if event.kind != "task_start" else None
            given = [event.clock, event.task_index, event.turn, event.text]
            self.added.append(given if reply is None else given + [reply])
            self.added_clocks.append(self.clock.to_state())
        await super().observe(event)

    def dump(self) -> list[dict]:
        return deep_copy(self.stored)

    def snapshot(self) -> dict:
        return deep_copy({**self.state_header(), "clock": self.clock.to_state(), "added": self.added,
                          "added_clocks": self.added_clocks})

    async def restore(self, state: dict) -> None:
        state = deep_copy(state)
        # A snapshot made before the clocks were kept has none: its messages are added again on
        # the clock as it runs (how that memaudit resumed).
        clocks = state.get("added_clocks") or [None] * len(state["added"])
        for (clock, task_index, turn, text, *reply), before in zip(state["added"], clocks):
            event = Event(self.SOURCE[-1], text, task_index, turn)  # its clock is the recorded one
            if before is not None:
                self.clock.load_state(before)
            self.clock.at(event)
            self.reply = reply[0] if reply else None
            await self.add(event)
        self.reply = None
        self.load_header(state)
        self.clock.load_state(state["clock"])
        self.added, self.added_clocks = state["added"], list(clocks)
