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
  cache, retries, repair of structured output). What the library asked for is what the model is
  asked: its temperature and max_tokens, and every other sampling parameter it sent (`top_p`,
  `stop`, penalties, `logprobs`, `logit_bias`, `n`, `seed`, …: memaudit/llm/dialects FORWARDED),
  keyed with the call and left out only where the model refuses one (a 400 naming it, recorded
  as the run's `adapted`). A `json_schema` response format is enforced as such (in the role's
  dialect); any other (`json_object`) is sent as the library sent it, no schema of ours, and the
  library's own parser reads the answer. The choices of an answer to `logprobs` or `n` > 1 come
  back as the server gave them. Tool calls (`tools`, `tool_choice`: named, `auto`, `required`, parallel calls) are
  answered in OpenAI's shape (`message.tool_calls`, `finish_reason: "tool_calls"`): forwarded
  where the role's dialect takes them (after checking once that the server honours them), else
  emulated by structured output (memaudit/llm/tools.py); either way cached with the tools in the
  key. A model failure (a required tool call that never came included) answers HTTP 400 (never
  retried by OpenAI clients) and is kept in `route.error` so the adapter can count it; streaming
  is refused.
- `POST /responses`: OpenAI's Responses API (Graphiti's default client), as the same call: its
  `instructions` and `input` are the messages, `text.format` the response format,
  `max_output_tokens` the token cap; answered in the Responses shape (`output_text`). Recorded,
  cached and replayed like a chat call (its key is the chat call's).
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
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
import orjson

from memaudit.errors import MemauditError
from memaudit.llm.dialects import DIALECTS, forwarded_params
from memaudit.llm.embed import Embedder
from memaudit.llm.http1 import read_request, send_json
from memaudit.llm.tools import NATIVE, ToolRequest, emulated_calls, emulated_messages, emulation_schema

@dataclass
class Route:
    role: str
    embedder: Embedder
    base_url: str
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
        self.served: Counter = Counter()  # requests answered per path (which API a library speaks)

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

    def route(self, role: str, embedder: Embedder) -> Route:
        token = f"r{next(self._ids)}"
        route = Route(role, embedder, f"http://127.0.0.1:{self.port}/{token}/v1")
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
        handler = {"/v1/chat/completions": self._chat, "/v1/responses": self._responses,
                   "/v1/embeddings": self._embeddings}.get(path)
        if method != "POST" or handler is None:
            return 404, error(f"{method} {path} is not served")
        self.served[path] += 1
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            return 400, error("the request body is not JSON")
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
        if request.get("stream"):
            return 400, error("the recording proxy serves non-streamed completions")
        max_tokens = request.get("max_completion_tokens") or request.get("max_tokens")
        result, text, calls = await self._call(route, request, request["messages"], max_tokens)
        return 200, completion(request, result, text, calls)

    async def _responses(self, route: Route, request: dict) -> tuple[int, dict]:
        refused = [name for name in RESPONSES_REFUSED if request.get(name)]
        if refused:
            return 400, error(f"the recording proxy serves /v1/responses without {', '.join(refused)}")
        chat = {**request, "response_format": (request.get("text") or {}).get("format")}
        result, text, _ = await self._call(route, chat, responses_messages(request), request.get("max_output_tokens"))
        return 200, response_object(request, result, text)

    async def _call(self, route: Route, request: dict, messages: list, max_tokens) -> tuple:
        """(result, text, tool calls) of a library's request: its messages, sampling and response
        format as it sent them (a `json_schema` enforced), its tools forwarded or emulated; a request
        leaving the tool choice to the model is counted on the route with whether it got a call."""
        tools = ToolRequest.of(request)
        result, text, calls = await self._answer(route, request, messages, max_tokens, tools)
        if tools is not None and tools.mode == "auto":
            route.tool_requests += 1
            route.tool_answers += bool(calls)
        return result, text, calls

    async def _answer(self, route: Route, request: dict, messages: list, max_tokens, tools) -> tuple:
        params = forwarded_params(request)
        schema = response_schema(params.get("response_format"))
        if schema is not None or (tools is not None and tools.mode != "none" and self.tool_path(route.role) != NATIVE):
            params.pop("response_format", None)  # sent in the role's dialect, or the emulation's
        sampling = {"temperature": request.get("temperature", 1.0), "max_tokens": max_tokens,
                    "params": params or None}
        if self.tool_path(route.role) == NATIVE:
            if tools is not None:
                await self.llm.check_native_tools(route.role)
            result = await self.llm.call(route.role, messages, schema=schema, tools=tools and tools.fields(),
                                         **sampling)
            return result, result.text, result.tool_calls
        messages = emulated_messages(messages, tools)
        if tools is None or tools.mode == "none":
            result = await self.llm.call(route.role, messages, schema=schema, **sampling)
            return result, result.text, None
        result = await self.llm.call(route.role, messages, schema=emulation_schema(tools), **sampling)
        return result, result.data.get("content") or "", emulated_calls(result.data, result.key)

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


def response_schema(response_format: dict | None) -> dict | None:
    """The schema to enforce: a `json_schema` response format's (chat's nested form, or the
    Responses API's flat one); any other format is sent as it came."""
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    return response_format.get("json_schema", response_format).get("schema")


def completion(request: dict, result, text: str, calls: list[dict] | None) -> dict:
    """The chat-completions answer in OpenAI's shape; with tool calls, `message.tool_calls` and
    `finish_reason: "tool_calls"` (and no content unless the model also wrote some); an answer to
    `logprobs` or `n` > 1 with every choice as the server gave it."""
    usage = result.usage
    message = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    choices = result.choices or [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}]
    return {"id": f"memaudit-{result.key[:16]}", "object": "chat.completion", "created": 0,
            "model": request.get("model", ""), "choices": choices,
            "usage": {"prompt_tokens": usage.get("prompt_tokens", 0),
                      "completion_tokens": usage.get("completion_tokens", 0),
                      "total_tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)}}


# What the proxy's /v1/responses does not take: a stream, a conversation the server would keep
# (it keeps none), tools (no library audited here calls tools through the Responses API).
RESPONSES_REFUSED = ("stream", "previous_response_id", "conversation", "tools")


def responses_messages(request: dict) -> list[dict]:
    """The chat messages of a Responses request: its `instructions` as the system message, then
    its `input` (a string, or messages whose content is a string or input-text parts)."""
    given = request.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])
    messages = [{"role": "system", "content": request["instructions"]}] if request.get("instructions") else []
    for item in items:
        content = item.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        messages.append({"role": item.get("role", "user"), "content": content})
    return messages


def response_object(request: dict, result, text: str) -> dict:
    """The Responses API's answer: one assistant message of output text, and the usage."""
    usage = result.usage
    prompt, completed = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    message = {"type": "message", "id": f"msg-{result.key[3:19]}", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}
    return {"id": f"memaudit-{result.key[:16]}", "object": "response", "created_at": 0, "status": "completed",
            "model": request.get("model", ""), "output": [message], "parallel_tool_calls": False,
            "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": prompt, "output_tokens": completed, "total_tokens": prompt + completed,
                      "input_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
                      "output_tokens_details": {"reasoning_tokens": usage.get("reasoning_tokens", 0)}}}


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
