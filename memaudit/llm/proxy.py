"""A recording proxy: an OpenAI-compatible loopback endpoint through which a third-party memory
library makes its model calls, so that they are cached, counted, replayable and attributed to the
role `memory:<system>` exactly like memaudit's own calls.

    proxy = await recording_proxy(llm)                 # started once per command, on first use
    route = proxy.route("memory:mem0ai", embedder)     # one per adapter instance
    library = SomeLibrary(openai_base_url=route.base_url, api_key="unused")
    with route.calls_from_here():                      # calls made now count for this episode
        await anyio.to_thread.run_sync(library.add, text)

Served paths, under each route's base URL (`http://127.0.0.1:<port>/<route>/v1`):
- `POST /chat/completions`: forwarded through `LLM.call` (the role's configured endpoint, the call
  cache, retries, repair of structured output). A `json_schema` response format is enforced as
  such; a bare `json_object` request is free text unless the route was given the library's output
  schema. Tool calls (`tools`, `tool_choice`: named, `auto`, `required`, parallel calls) are
  answered in OpenAI's shape (`message.tool_calls`, `finish_reason: "tool_calls"`): forwarded
  where the role's dialect takes them (after checking once that the server honours them), else
  emulated by structured output (memaudit/llm/tools.py); either way cached with the tools in the
  key. A model failure (a required tool call that never came included) answers HTTP 400 (never
  retried by OpenAI clients) and is kept in `route.error` so the adapter can count it; streaming
  and `n` > 1 are refused.
- `POST /embeddings`: the route's embedder (cached in the store like every memaudit vector),
  floats or base64 as asked.
- `GET /models`.
The proxy lives in the command's event loop; libraries call it from worker threads. It is stopped
when the command's runtime closes (`close_proxy`)."""
from __future__ import annotations

import asyncio
import base64
import contextvars
import itertools
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
import orjson

from memaudit.errors import MemauditError
from memaudit.llm.dialects import DIALECTS
from memaudit.llm.embed import Embedder
from memaudit.llm.http1 import read_request, send_json
from memaudit.llm.tools import NATIVE, ToolRequest, emulated_calls, emulated_messages, emulation_schema

@dataclass
class Route:
    role: str
    embedder: Embedder
    base_url: str
    json_schema: dict | None = None   # the library's output schema for bare json_object requests
    error: BaseException | None = None  # the last failure a call of this route met
    # Requests leaving the tool choice to the model (`auto`), and how many of them got a call: a
    # library whose requests never get one stores nothing (adapters/memory_calls.py FailureLog).
    tool_requests: int = 0
    tool_answers: int = 0
    _context: contextvars.Context | None = field(default=None, repr=False)

    @contextmanager
    def calls_from_here(self):
        """Calls the library makes inside this block run in the caller's context, so they are
        collected with the caller's artifact (the episode, the scoring pass) like direct calls."""
        self._context, self.error = contextvars.copy_context(), None
        try:
            yield self
        finally:
            self._context = None


class RecordingProxy:
    def __init__(self, llm):
        self.llm = llm
        self.routes: dict[str, Route] = {}
        self._ids = itertools.count(1)
        self._server: asyncio.AbstractServer | None = None
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            # Libraries keep connections alive: end them, so their handlers finish on their own.
            for writer in self._connections.values():
                writer.close()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    def route(self, role: str, embedder: Embedder, *, json_schema: dict | None = None) -> Route:
        token = f"r{next(self._ids)}"
        route = Route(role, embedder, f"http://127.0.0.1:{self.port}/{token}/v1", json_schema)
        self.routes[token] = route
        return route

    # -- HTTP ----------------------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections[asyncio.current_task()] = writer
        try:
            while (request := await read_request(reader)) is not None:
                method, target, _, body = request
                status, payload = await self._dispatch(method, target, body)
                send_json(writer, status, payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._connections.pop(asyncio.current_task(), None)

    async def _dispatch(self, method: str, target: str, body: bytes) -> tuple[int, dict]:
        token, _, path = target.split("?", 1)[0].lstrip("/").partition("/")
        route = self.routes.get(token)
        if route is None:
            return 404, error(f"no route {token!r}")
        path = "/" + path.rstrip("/")
        if method == "GET" and path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": route.role, "object": "model"}]}
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/embeddings"):
            return 404, error(f"{method} {path} is not served")
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            return 400, error("the request body is not JSON")
        handler = self._chat if path.endswith("completions") else self._embeddings
        context = route._context.copy() if route._context is not None else contextvars.copy_context()
        try:
            return await asyncio.get_running_loop().create_task(handler(route, request), context=context)
        except MemauditError as exc:  # a model failure, a cache miss under replay, an endpoint down
            route.error = exc
            return 400, error(str(exc))
        except Exception as exc:  # a malformed request the library sent: its call fails, loudly
            route.error = exc
            return 400, error(f"{type(exc).__name__}: {exc}")  # 400: clients do not retry it

    async def _chat(self, route: Route, request: dict) -> tuple[int, dict]:
        if request.get("stream") or request.get("n", 1) != 1:
            return 400, error("the recording proxy serves single, non-streamed completions")
        tools = ToolRequest.of(request)
        status, answer = await self._answer(route, request, tools)
        if tools is not None and tools.mode == "auto":
            route.tool_requests += 1
            route.tool_answers += bool(answer["choices"][0]["message"].get("tool_calls"))
        return status, answer

    async def _answer(self, route: Route, request: dict, tools: ToolRequest | None) -> tuple[int, dict]:
        schema = response_schema(request.get("response_format"), route.json_schema)
        sampling = {"temperature": request.get("temperature", 1.0),
                    "max_tokens": request.get("max_completion_tokens") or request.get("max_tokens")}
        if self.tool_path(route.role) == NATIVE:
            if tools is not None:
                await self.llm.check_native_tools(route.role)
            result = await self.llm.call(route.role, request["messages"], schema=schema,
                                         tools=tools and tools.fields(), **sampling)
            return 200, completion(request, result, result.text, result.tool_calls)
        messages = emulated_messages(request["messages"], tools)
        if tools is None or tools.mode == "none":
            result = await self.llm.call(route.role, messages, schema=schema, **sampling)
            return 200, completion(request, result, result.text, None)
        result = await self.llm.call(route.role, messages, schema=emulation_schema(tools), **sampling)
        return 200, completion(request, result, result.data.get("content") or "", emulated_calls(result.data, result.key))

    def tool_path(self, role: str) -> str:
        """How this role's endpoint answers tool calls, as its dialect says: native or emulated."""
        return DIALECTS[self.llm.role_config(role).backend].tool_calls

    async def _embeddings(self, route: Route, request: dict) -> tuple[int, dict]:
        texts = request.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return 400, error("input must be a string or a list of strings")
        import numpy as np  # here: a command whose proxy embeds nothing never loads it

        vectors = await route.embedder.embed(texts)
        as_base64 = request.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() if as_base64
                 else [float(x) for x in v]} for i, v in enumerate(vectors)]
        return 200, {"object": "list", "data": data, "model": route.embedder.model_name,
                     "usage": {"prompt_tokens": 0, "total_tokens": 0}}


def response_schema(response_format: dict | None, hint: dict | None) -> dict | None:
    """The schema to enforce: the request's own json_schema, else the route's hint for json_object."""
    if not response_format:
        return None
    if response_format.get("type") == "json_schema":
        return response_format.get("json_schema", {}).get("schema")
    if response_format.get("type") == "json_object":
        return hint
    return None


def completion(request: dict, result, text: str, calls: list[dict] | None) -> dict:
    """The chat-completions answer in OpenAI's shape; with tool calls, `message.tool_calls` and
    `finish_reason: "tool_calls"` (and no content unless the model also wrote some)."""
    usage = result.usage
    message = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return {"id": f"memaudit-{result.key[:16]}", "object": "chat.completion", "created": 0,
            "model": request.get("model", ""),
            "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}],
            "usage": {"prompt_tokens": usage.get("prompt_tokens", 0),
                      "completion_tokens": usage.get("completion_tokens", 0),
                      "total_tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)}}


def error(message: str) -> dict:
    return {"error": {"message": message, "type": "memaudit_proxy"}}


_proxies: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


async def _started(llm) -> RecordingProxy:
    proxy = RecordingProxy(llm)
    await proxy.start()
    return proxy


async def recording_proxy(llm) -> RecordingProxy:
    """The proxy of this model client, started on first use in the running event loop (adapters
    of concurrent users share it)."""
    if llm not in _proxies:
        _proxies[llm] = asyncio.ensure_future(_started(llm))
    return await _proxies[llm]


async def close_proxy(llm) -> None:
    """Stop the proxy of this model client, if one was started (the runtime does this on exit)."""
    started = _proxies.pop(llm, None)
    if started is not None:
        with anyio.CancelScope(shield=True):  # a cancelled command still stops its proxy
            await (await started).aclose()
