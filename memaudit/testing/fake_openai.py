"""A fake OpenAI-compatible server as an httpx transport: scripted answers, injected faults,
optional latency. It is a test double only: `make run` never uses it.

    fake = FakeOpenAI()                                  # schema-driven valid answers
    fake.on("simulator", lambda body: {"feedback_type": "satisfied", "text": "thanks"})
    fake.on_text(lambda body: "a reply")                 # free-text calls (no schema)
    fake.on_json_object(lambda body: {"memory": []})     # `json_object` calls without a schema (None: on_text's)
    fake.faults = [429, 503]                             # next responses are these statuses
    fake.fault_for = lambda body: "garbage"              # a fault (or None) picked by each request's body
    fake.embedding_requests                              # POST /v1/embeddings bodies (vectors: `embedding`)
    fake.api_key = "sk-test"                             # other bearer tokens get a 401 (quoting them)
    FakeOpenAI(reasoning=True)                           # a hosted reasoning model (see `refusal`)
    fake.ignore_tools = True                             # a server that drops `tools` and answers in text
    fake.refused = {"logit_bias"}                        # a 400 naming each of these parameters when sent
    fake.echo_key = True                                 # every answer's strings quote the Authorization header
    fake.tools_only_when_named = True                    # calls a tool only when tool_choice names it
    llm = LLM(settings, store.calls, transport=fake.transport())

Tool calls are answered natively (`message.tool_calls`) and, asked through memaudit's emulation
schema (memaudit/llm/tools.py), as the same calls in that schema's shape (`tool_calls_for`).
"""
from __future__ import annotations

import hashlib
import random
from collections import Counter
from typing import Callable

import anyio
import httpx
import orjson

from memaudit.llm.tools import ToolRequest


def schema_name(body: dict) -> str | None:
    rf = body.get("response_format")
    if not rf:
        return None
    if rf.get("type") == "json_object":
        return None  # the llama.cpp dialect sends no schema name
    return rf["json_schema"]["name"]


def schema_of(body: dict) -> dict | None:
    rf = body.get("response_format")
    if not rf:
        return None
    return rf.get("schema") if rf.get("type") == "json_object" else rf["json_schema"]["schema"]


def example(schema: dict, rng: random.Random, defs: dict | None = None):
    """A valid instance of a (subset) JSON schema; `$ref`s into the root's `$defs` (as pydantic
    writes nested models) are followed."""
    defs = schema.get("$defs", {}) if defs is None else defs
    if "$ref" in schema:
        return example(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), rng, defs)
    if "anyOf" in schema:
        return example(schema["anyOf"][0], rng, defs)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {name: example(sub, rng, defs) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [example(schema.get("items", {"type": "string"}), rng, defs)
                for _ in range(max(schema.get("minItems", 0), 1))]
    if kind == "number":
        return 0.5
    if kind == "integer":
        return max(schema.get("minimum", 1), 1)
    if kind == "boolean":
        return rng.random() < 0.5
    return "fake " + rng.choice(["alpha", "beta", "gamma", "delta"])


class FakeOpenAI:
    def __init__(self, *, latency: float = 0.0, fault_rate: float = 0.0, fault_statuses=(429, 503),
                 retry_after: str | None = "0", seed: int = 0, reasoning: bool = False):
        self.latency = latency
        self.fault_rate = fault_rate
        self.fault_statuses = fault_statuses
        self.retry_after = retry_after
        self.faults: list = []          # scripted next outcomes: int status, "timeout", "overflow", "garbage"
        # The outcome of a request picked by its body, whatever its turn (None: not picked): a fault
        # that meets one call of a library that sends several at once.
        self.fault_for: Callable[[dict], object] | None = None
        self.handlers: dict[str, Callable[[dict], object]] = {}
        # Asked for a structured answer no handler gives: an answer, or None for the schema's example.
        self.fallback: Callable[[dict], object | None] = lambda body: None
        self.text_handler: Callable[[dict], str] = lambda body: "Here is a concrete plan: step one, step two."
        # A library's bare `json_object` request (no schema: the prompt says the format): its answer,
        # or None for the free-text handler's.
        self.json_object_handler: Callable[[dict], object | None] = lambda body: None
        self.requests: list[dict] = []
        self.status_counts: Counter = Counter()
        self.in_flight = 0
        self.peak_in_flight = 0             # the most requests the transport held at once
        self.rng = random.Random(seed)
        self.api_key: str | None = None      # set: requests without this bearer token get a 401
        self.models: set[str] | None = None  # set: other model names get a 404 model_not_found
        self.reasoning = reasoning
        self.embedding_requests: list[dict] = []
        # llama.cpp's `POST /tokenize` beside /v1 (one token per 3 characters here); "vllm": vLLM's
        # form of it ({"prompt"}; a body without one is a 400); False: a server without one, like a
        # hosted API, where only the context-length error tells.
        self.tokenize: bool | str = True
        self.ignore_tools = False  # True: answer requests offering tools as if they offered none
        self.refused: set[str] = set()  # request parameters answered with a 400 naming them
        # The calls asked for a request offering tools, as (name, arguments) pairs ([]: it answers in
        # words), or None for the default choice (`tool_calls_for`); natively and emulated alike.
        self.tool_chooser: Callable[[ToolRequest, list[dict]], list[tuple[str, dict]] | None] = \
            lambda request, messages: None
        # True: like a server (or a proxy before it) that copies the request's credentials into its
        # answers, every string of each answer (JSON text and tool arguments included) quotes them.
        self.echo_key = False
        # True: a server that calls a tool only when `tool_choice` names one, and answers `auto` and
        # `required` in plain text (a tool-call parser that only handles forced calls).
        self.tools_only_when_named = False

    def on(self, name: str, fn: Callable[[dict], object]) -> "FakeOpenAI":
        self.handlers[name] = fn
        return self

    def on_text(self, fn: Callable[[dict], str]) -> "FakeOpenAI":
        self.text_handler = fn
        return self

    def on_json_object(self, fn: Callable[[dict], object]) -> "FakeOpenAI":
        self.json_object_handler = fn
        return self

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if self.latency:
                await anyio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        reply = self.reply(request.url.path, request.headers.get("authorization"), request.content)
        if reply is None:
            raise httpx.ReadTimeout("fake timeout", request=request)
        status, payload, headers = reply
        return httpx.Response(status, json=payload, headers=headers)

    def reply_http(self, method: str, path: str, headers: dict, content: bytes) -> tuple[int, object, dict] | None:
        """The loopback server's entry point (headers with lower-case names); a sibling fake with
        more routes (memaudit/testing/fake_batches.py) answers them here. A query (a key some hosts
        take as `?api-key=…`) is no part of the route."""
        return self.reply(path.split("?")[0], headers.get("authorization"), content)

    def reply(self, path: str, authorization: str | None, content: bytes) -> tuple[int, dict, dict] | None:
        """(status, JSON payload, headers) for one request, or None for a timeout. Shared by the
        httpx transport and the loopback HTTP server, so both answer alike."""
        if self.api_key is not None and authorization != f"Bearer {self.api_key}":
            # Like some real servers, the refusal quotes the credentials it was given.
            return self._status(401, {"error": {"message": f"Incorrect API key provided: {authorization}",
                                                "code": "invalid_api_key"}})
        if path.rstrip("/").endswith("/models"):
            return 200, {"data": [{"id": "fake"}]}, {}
        if path.rstrip("/").endswith("/tokenize") and self.tokenize and not path.endswith("/extras/tokenize"):
            asked = orjson.loads(content)
            field = "prompt" if self.tokenize == "vllm" else "content"
            if field not in asked:
                return self._status(400, {"error": {"message": f"field required: {field}"}})
            return 200, {"tokens": list(range(-(-len(asked[field]) // 3)))}, {}
        route = path.rstrip("/").rsplit("/", 2)
        if route[-1] != "embeddings" and route[-2:] != ["chat", "completions"]:
            return self._status(404, {"error": {"message": f"no route {path}"}})
        body = orjson.loads(content)
        if self.models is not None and body.get("model") not in self.models:
            return self._status(404, {"error": {"message": f"The model `{body.get('model')}` does not exist",
                                                "code": "model_not_found"}})
        if route[-1] == "embeddings":
            return self.embeddings(body)
        self.requests.append(body)
        refused = self.refusal(body)
        if refused is not None:
            return self._status(400, refused)
        fault = self.next_fault(body)
        if fault == "overflow":
            return self._status(400, {"error": {"message": "This model's maximum context length is 8192 tokens",
                                                "code": "context_length_exceeded"}})
        if fault == "timeout" or isinstance(fault, int):
            return self.fault_reply(fault)
        if fault != "garbage" and body.get("tools") and not self.ignore_tools and not (
                self.tools_only_when_named and not isinstance(body.get("tool_choice"), dict)):
            calls = self.tool_calls(body)
            answer = self.completion(body, "" if calls else self.answer(body), calls)
        else:
            answer = self.completion(body, "{not json" if fault == "garbage" else self.answer(body))
        return self._status(200, echoed(answer, authorization) if self.echo_key else answer)

    def tool_calls(self, body: dict) -> list[dict]:
        """The native tool calls answering a request that offers tools (none: it answers in words)."""
        chosen = self.tool_chooser(ToolRequest.of(body), body["messages"])
        return native_calls(body) if chosen is None else call_json(body, chosen)

    def next_fault(self, body: dict):
        """The fault `fault_for` picks for this request, else the scripted next outcome (`faults`),
        else a random fault at `fault_rate`, else None."""
        fault = self.fault_for(body) if self.fault_for is not None else None
        if fault is None and self.faults:
            fault = self.faults.pop(0)
        if fault is None and self.fault_rate and self.rng.random() < self.fault_rate:
            fault = self.rng.choice(self.fault_statuses)
        return fault

    def fault_reply(self, fault) -> tuple[int, dict, dict] | None:
        """The answer of an injected status (429 with `retry_after`) or timeout (None)."""
        if fault == "timeout":
            return None
        headers = {"retry-after": self.retry_after} if fault == 429 and self.retry_after is not None else {}
        return self._status(fault, {"error": {"message": f"injected {fault}"}}, headers)

    def embeddings(self, body: dict) -> tuple[int, dict, dict] | None:
        """`POST /v1/embeddings`: one vector of EMBEDDING_DIM per input, fixed by (model, text) and
        not normalised, the rows in reverse order (each names its input's index); faults as for
        chat ("garbage": one vector short)."""
        self.embedding_requests.append(body)
        texts = [body["input"]] if isinstance(body.get("input"), str) else list(body.get("input") or [])
        fault = self.next_fault(body)
        if isinstance(fault, int) or fault == "timeout":
            return self.fault_reply(fault)
        rows = [{"object": "embedding", "index": i, "embedding": embedding(body.get("model"), text)}
                for i, text in enumerate(texts)]
        if fault == "garbage":
            rows = rows[1:]
        tokens = sum(len(t) for t in texts) // 4
        return self._status(200, {"object": "list", "model": body.get("model"), "data": rows[::-1],
                                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def refusal(self, body: dict) -> dict | None:
        """As a hosted reasoning model answers a request it does not take: the 400 error body the
        OpenAI API sends for `max_tokens` and for a sampling parameter other than its default."""
        for param in sorted(self.refused & set(body)):
            return {"error": {"message": f"Unsupported parameter: '{param}' is not supported by this server.",
                              "type": "invalid_request_error", "param": param, "code": "unsupported_parameter"}}
        if not self.reasoning:
            return None
        if "max_tokens" in body:
            return {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                         "Use 'max_completion_tokens' instead.",
                              "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}
        for param in ("temperature", "top_p"):
            if param in body and body[param] != 1:
                return {"error": {"message": f"Unsupported value: '{param}' does not support {body[param]} with this "
                                             "model. Only the default (1) value is supported.",
                                  "type": "invalid_request_error", "param": param, "code": "unsupported_value"}}
        return None

    def completion(self, body: dict, text: str, calls: list[dict] | None = None) -> dict:
        """The 200 answer (`n` choices, each with its token logprobs when asked); a reasoning model
        also reports the reasoning tokens it spent."""
        answer = completion(body, text, "tool_calls" if calls else "stop")
        answer["choices"] *= max(body.get("n") or 1, 1)
        answer["choices"] = [{**choice, "index": n, **({"logprobs": logprobs(text, body.get("top_logprobs") or 0)}
                                                       if body.get("logprobs") else {})}
                             for n, choice in enumerate(answer["choices"])]
        if calls:
            answer["choices"][0]["message"].update(content=None, tool_calls=calls)
        if self.reasoning:
            reasoning_tokens = 16
            answer["usage"]["completion_tokens"] += reasoning_tokens
            answer["usage"]["total_tokens"] += reasoning_tokens
            answer["usage"]["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
        return answer

    def _status(self, status: int, payload: dict, headers=None) -> tuple[int, dict, dict]:
        self.status_counts[status] += 1
        return status, payload, headers or {}

    def answer(self, body: dict) -> str:
        name = schema_name(body)
        schema = schema_of(body)
        if schema is None and (body.get("response_format") or {}).get("type") == "json_object" and \
                (out := self.json_object_handler(body)) is not None:
            pass
        elif schema is None:
            return self.text_handler(body)
        elif name in self.handlers:
            out = self.handlers[name](body)
        elif (out := self.fallback(body)) is not None:
            pass
        elif (tools := emulated_tools(schema)) is not None:
            chosen = self.tool_chooser(tools, body["messages"])
            out = emulated_answer(schema, body["messages"]) if chosen is None else emulated_shape(schema, chosen)
        else:
            seed = int(hashlib.sha256(orjson.dumps(body["messages"])).hexdigest()[:8], 16)
            out = example(schema, random.Random(seed))
        return out if isinstance(out, str) else orjson.dumps(out).decode()


def echoed(answer: dict, authorization: str | None) -> dict:
    """A chat answer whose text (each prose string of a JSON answer: labels stay valid) and tool
    arguments quote `authorization`."""
    said = f" (sent with {authorization})"
    message = answer["choices"][0]["message"]
    if isinstance(message.get("content"), str):
        message["content"] = _quoting(message["content"], said)
    for call in message.get("tool_calls") or []:
        call["function"]["arguments"] = _quoting(call["function"]["arguments"], said)
    return answer


def _quoting(text: str, said: str) -> str:
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text + said

    def walk(node):
        if isinstance(node, str):
            return node + said if " " in node.strip() else node
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        return [walk(v) for v in node] if isinstance(node, list) else node
    return orjson.dumps(walk(data)).decode()


# -- tool calls ---------------------------------------------------------------------------------------

def tool_calls_for(request: ToolRequest, messages: list[dict]) -> list[tuple[str, dict]]:
    """(name, arguments) of the calls the fake makes: none for `tool_choice: none`; else the named
    tool, or the offered tool with the fewest required parameters (the first of those), once, or
    twice (in parallel) unless a tool is named or parallel calls are off. Text arguments quote the
    last line of the latest user message, so stored memories follow the conversation."""
    if request.mode == "none":
        return []
    offered = [t for t in request.tools if request.named in (None, t["function"]["name"])]
    tool = min(offered, key=lambda t: len(_parameters(t).get("required", ())))
    said = latest_user_line(messages)
    count = 1 if request.named is not None or request.parallel is False else 2
    return [(tool["function"]["name"], _arguments(_parameters(tool), said if n == 0 else f"also: {said}"))
            for n in range(count)]


def native_calls(body: dict) -> list[dict]:
    return call_json(body, tool_calls_for(ToolRequest.of(body), body["messages"]))


def call_json(body: dict, calls: list[tuple[str, dict]]) -> list[dict]:
    """(name, arguments) pairs as OpenAI's `message.tool_calls`, their ids fixed by the request."""
    digest = hashlib.sha256(orjson.dumps(body["messages"])).hexdigest()[:12]
    return [{"id": f"call_{digest}_{n}", "type": "function",
             "function": {"name": name, "arguments": orjson.dumps(arguments).decode()}}
            for n, (name, arguments) in enumerate(calls)]


def emulated_tools(schema: dict) -> ToolRequest | None:
    """The tool request behind memaudit's emulation schema (memaudit/llm/tools.py), or None."""
    calls = schema.get("properties", {}).get("tool_calls")
    if not isinstance(calls, dict) or calls.get("type") != "array":
        return None
    items = calls["items"].get("anyOf", [calls["items"]])
    if not all(isinstance(item.get("properties", {}).get("name", {}).get("enum"), list)
               and "arguments" in item["properties"] for item in items):
        return None  # a role's own `tool_calls` field (memt's policy), not the emulation schema
    tools = tuple({"type": "function", "function": {"name": item["properties"]["name"]["enum"][0],
                                                     "parameters": {**item["properties"]["arguments"],
                                                                    "$defs": schema.get("$defs", {})}}}
                  for item in items)
    return ToolRequest(tools, "required" if calls.get("minItems") else None,
                       False if calls.get("maxItems") == 1 else None)


def emulated_answer(schema: dict, messages: list[dict]) -> dict:
    return emulated_shape(schema, tool_calls_for(emulated_tools(schema), messages))


def emulated_shape(schema: dict, calls: list[tuple[str, dict]]) -> dict:
    """(name, arguments) pairs in the emulation schema's shape."""
    answer = {"tool_calls": [{"name": name, "arguments": arguments} for name, arguments in calls]}
    return {"content": "", **answer} if "content" in schema["properties"] else answer


def latest_user_line(messages: list[dict]) -> str:
    """The last line of the latest user message that reads as prose (not markup or a rule)."""
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            lines = [line.strip() for line in message["content"].splitlines()]
            prose = [line for line in lines if any(c.isalpha() for c in line) and line[:1] not in "<=#"]
            return prose[-1] if prose else "nothing said"
    return "nothing said"


def _parameters(tool: dict) -> dict:
    return tool["function"].get("parameters") or {"type": "object", "properties": {}}


def _arguments(parameters: dict, said: str) -> dict:
    """Arguments for a tool's parameters: text fields say `said`; the rest follow `example`."""
    defs = parameters.get("$defs", {})
    rng = random.Random(said)
    out = {}
    for name, sub in parameters.get("properties", {}).items():
        sub = _resolved(sub, defs)
        out[name] = said if sub.get("type") == "string" and "enum" not in sub else example(sub, rng)
    return out


def _resolved(schema: dict, defs: dict) -> dict:
    ref = schema.get("$ref")
    return defs.get(ref.rsplit("/", 1)[-1], {}) if isinstance(ref, str) else schema


def logprobs(text: str, top: int) -> dict:
    """Token log probabilities of an answer as OpenAI gives them: a token a word, its `top`
    alternatives beside it."""
    def entry(token: str, logprob: float) -> dict:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}
    return {"content": [{**entry(word, -0.1), "top_logprobs": [entry(word if n == 0 else f"{word}{n}", -0.1 - n)
                                                               for n in range(top)]}
                        for word in text.split()[:16]]}


EMBEDDING_DIM = 384  # as the bundled model's: adapters may size empty matrices by it


def embedding(model, text: str) -> list[float]:
    """A fixed pseudo-random vector per (model, text), unnormalised."""
    rng = random.Random(hashlib.sha256(f"{model}\n{text}".encode()).digest())
    return [round(rng.uniform(-2.0, 2.0), 4) for _ in range(EMBEDDING_DIM)]


def completion(body: dict, text: str, finish: str = "stop") -> dict:
    prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
    return {"id": "fake", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(text) // 4,
                      "total_tokens": prompt_chars // 4 + len(text) // 4}}
