"""The one entry point for model calls: `await llm.call(role, messages, ...)`.

Every call — simulator, judges, memory adapters — goes through here, so every call is cached,
counted and replayable. The client knows roles only as names with per-role endpoint settings.
"""
from __future__ import annotations

import contextvars
import datetime as dt
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Awaitable, Callable

import anyio
import orjson

from memaudit.caches import CallCache
from memaudit.config import RoleConfig, Settings
from memaudit.errors import CacheMiss, ContextOverflow, EndpointError, InvalidOutput, Refusal, scrub
from memaudit.llm.dialects import (CHAT_PATH, DIALECTS, REFUSABLE, ParameterRefused, Refusals, answer_choices,
                                   not_refused, parse_choice, request_body, sampling)
from memaudit.llm.keys import RECORD_VERSION, derive_seed, key_record, keyed
from memaudit.llm.ratelimit import RateBudgets
from memaudit.llm.schema import problem as schema_problem
from memaudit.llm.secrets import configured as configured_secrets
from memaudit.llm.tools import (AUTO_PROBE, AUTO_PROBE_MESSAGES, MAX_TOOL_CALLS, PROBE, PROBE_MESSAGES, answered_calls,
                                calls_problem, ignores_tools)
from memaudit.llm.tokens import SERVER_COUNT, local_count, server_count, server_root
from memaudit.llm.transport import Transport, Unreachable

if TYPE_CHECKING:
    import httpx

# Calls made inside `llm.collect()` are appended here as (role, key, from_cache): the artifact that
# results from them records which calls it used (token accounting per run and role, traceability).
_collector: contextvars.ContextVar[list | None] = contextvars.ContextVar("memaudit_calls", default=None)

# Inside `llm.batching(collector)`, every call that misses the cache is recorded for a batch instead
# of made (memaudit/llm/batch.py). A context variable, like the collector above, so every client of
# the command (a judge panel's per-model clones, a memory system's proxy too) and every task it
# starts follows it.
_batching: contextvars.ContextVar = contextvars.ContextVar("memaudit_batching", default=None)

# The probes of a native tool endpoint (memaudit/llm/tools.py), each with what a failed one says.
TOOL_PROBES = ((PROBE, PROBE_MESSAGES, "ignores `tools`: asked to call a named tool, it answered without the call"),
               (AUTO_PROBE, AUTO_PROBE_MESSAGES,
                "calls a tool only when the request names it: asked plainly to call a tool with the choice left to "
                "the model (`auto`, as langmem asks), it answered in text, and the library would store nothing"))

REPAIR_MESSAGE = ("Your previous answer could not be used: {problem}. Answer again with only a JSON object "
                  "that follows the required format.")


def collected_uses() -> list | None:
    """The (role, key, from_cache) list of the innermost `llm.collect()` around this code, or None."""
    return _collector.get()


@dataclass
class CallResult:
    text: str
    data: object | None  # the parsed, validated object for structured calls
    usage: dict
    key: str
    cached: bool
    tool_calls: list | None = None  # a call offering tools: the calls the answer made (OpenAI's shape)
    # A call forwarding `logprobs` or `n` > 1 (memaudit/llm/dialects FORWARDED): every choice of the
    # answer as the server gave it (index, message, finish_reason, logprobs).
    choices: list | None = None


@dataclass
class RoleStats:
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    failures: int = 0


@dataclass
class _Flight:
    done: anyio.Event = field(default_factory=anyio.Event)
    result: CallResult | None = None
    error: BaseException | None = None


class LLM:
    def __init__(self, settings: Settings, store: CallCache, *, transport: httpx.AsyncBaseTransport | None = None,
                 start_server: Callable[[], Awaitable[str]] | None = None):
        self.settings = settings
        # Started on the first call that needs a model (embedded server): a fully cached command
        # never starts it.
        self._start_server = start_server
        self._server_lock = anyio.Lock()
        self.store = store
        self.transport = Transport(settings.concurrency, settings.max_retries, settings.backoff_base,
                                   settings.backoff_cap, settings.timeout, mock=transport,
                                   rates=RateBudgets.of(settings), secrets=configured_secrets(settings))
        self.stats: dict[str, RoleStats] = {}
        self._flights: dict[str, _Flight] = {}
        self._roles: tuple[Settings, dict] = (settings, {})
        self.refusals = Refusals(store)
        # role -> what measured its last prompt against a window (None: nothing could; the server's
        # context-length error decides): memaudit/llm/tokens.py
        self.counted_by: dict[str, str | None] = {}
        self._tools_checked: set[tuple[str, str]] = set()  # (model, backend) seen to honour tools
        self._tools_lock = anyio.Lock()

    def role_config(self, role: str) -> RoleConfig:
        """The settings of `role`, resolved once per settings object (a hot path: every call)."""
        settings, resolved = self._roles
        if settings is not self.settings:  # a clone with other settings, or the embedded URL set
            self._roles = settings, resolved = self.settings, {}
        if role not in resolved:
            resolved[role] = self.settings.role(role)
        return resolved[role]

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):  # a cancelled command still closes its sessions
            await self.transport.aclose()

    @contextmanager
    def collect(self):
        """Collect the (role, key, from_cache) of every call made in this context."""
        uses: list = []
        token = _collector.set(uses)
        try:
            yield uses
        finally:
            _collector.reset(token)

    @contextmanager
    def batching(self, collector):
        """Record the calls that miss the cache for a batch instead of making them (`--batch`)."""
        token = _batching.set(collector)
        try:
            yield collector
        finally:
            _batching.reset(token)

    def seed(self, role: str, *parts) -> int:
        return derive_seed(self.settings.seed, role, *parts)

    async def call(self, role: str, messages: list[dict], *, temperature: float = 0.0,
                   max_tokens: int | None = None, schema: dict | None = None,
                   check: Callable[[object], str | None] | None = None, sample: int = 0,
                   seed_parts: tuple = (), tools: dict | None = None,
                   schema_name: str | None = None, params: dict | None = None,
                   repairs: int | None = None) -> CallResult:
        """Call the model for `role`. With `schema`, the answer is parsed and validated (plus `check`,
        which returns a problem sentence or None); invalid answers get a bounded repair attempt, then
        InvalidOutput. `tools`: tool fields sent natively (memaudit/llm/tools.py `ToolRequest.fields`),
        keyed with the call; the answer's tool calls are in `tool_calls`, and a required call that
        was not made is an invalid answer. The schema goes by the role's name unless `schema_name`
        names it (a published request's own name, then keyed). `params`: a library's other sampling
        parameters, sent and keyed as it sent them (the recording proxy: dialects FORWARDED), but
        those the model refused. Per-role config overrides `temperature` and `max_tokens`.
        `repairs`: the repair attempts of this call (None: the role's; 0 for a caller that takes an
        invalid answer as the published code did)."""
        # A model that refuses a parameter (a 400 naming it) is asked again without it, under the
        # key of what is then sent; the refusal is remembered (memaudit/llm/dialects/).
        for _ in REFUSABLE:
            try:
                return await self._call_as_sent(role, messages, temperature, max_tokens, schema, check, sample,
                                                seed_parts, tools, schema_name, params, repairs)
            except ParameterRefused as exc:
                rc = self.role_config(role)
                await self.refusals.learn(rc.model, rc.backend, exc.param)
        return await self._call_as_sent(role, messages, temperature, max_tokens, schema, check, sample, seed_parts,
                                        tools, schema_name, params, repairs)

    async def _call_as_sent(self, role, messages, temperature, max_tokens, schema, check, sample,
                            seed_parts, tools=None, schema_name=None, params=None, repairs=None) -> CallResult:
        rc = self.role_config(role)
        if repairs is not None:  # not part of the key, as the role's setting is not
            rc = replace(rc, repair_attempts=repairs)
        refused = await self.refusals.of(rc.model, rc.backend)
        sent = sampling(rc, temperature, max_tokens, refused=refused)
        seed = self.seed(role, *seed_parts)
        record = key_record(model=rc.model, backend=rc.backend, messages=messages, temperature=sent.temperature,
                            top_p=sent.top_p, max_tokens=sent.max_tokens, seed=seed, schema=schema, sample=sample,
                            reasoning_effort=sent.reasoning_effort, tools=tools, schema_name=schema_name,
                            params=not_refused(params, refused))
        key, request_json = keyed(record)
        stats = self.stats.setdefault(role, RoleStats())
        flight = self._flights.get(key)
        if flight is not None:  # single-flight: an identical request is already on its way
            await flight.done.wait()
            if isinstance(flight.error, anyio.get_cancelled_exc_class()):
                # The caller that made the request was cancelled, not this one: ask again.
                return await self._call_as_sent(role, messages, temperature, max_tokens, schema, check, sample,
                                                seed_parts, tools, schema_name, params, repairs)
            if flight.error is not None:
                raise flight.error
            self._note_use(role, key, True)
            return flight.result
        flight = self._flights[key] = _Flight()
        try:
            result = await self._resolve(role, rc, record, key, request_json, schema, check, stats)
            flight.result = result
            self._note_use(role, key, result.cached)
            return result
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            flight.done.set()
            del self._flights[key]

    async def count_tokens(self, role: str, messages: list[dict]) -> int | None:
        """The prompt's size in tokens by the role's server's own tokenizer, else the model's own
        tokenizer when it is on this machine (memaudit/llm/tokens.py), or None. Which one counted is
        kept in `counted_by[role]`. Recorded in the call cache like a call (role `tokenize:<role>`),
        so replay needs no server and decides overflow exactly as the recorded run did."""
        rc = self.role_config(role)
        key, request_json = keyed({"v": RECORD_VERSION, "tokenize": True, "model": rc.model, "backend": rc.backend,
                                   "messages": messages})
        if self.settings.cache in ("rw", "replay"):
            row = await self.store.get_call(key)
            if row is not None:
                recorded = orjson.loads(row["response"])
                # rows recorded before the local tokenizer existed were counted by the server or by none
                self.counted_by[role] = recorded.get("counter", SERVER_COUNT if recorded["tokens"] is not None
                                                     else None)
                return recorded["tokens"]
        if self.settings.cache == "replay":
            raise CacheMiss(f"tokenize:{role}", key)
        count, counter = await self._server_count(role, rc, messages)
        if count is None:
            count, counter = local_count(rc.model, messages) or (None, None)
        self.counted_by[role] = counter
        if self.settings.cache != "off":
            self.store.put_call(key=key, role=f"tokenize:{role}", model=rc.model, request=request_json,
                                response=orjson.dumps({"tokens": count, "counter": counter}).decode(), ok=True,
                                created=_now())
            await self.store.maybe_flush()
        return count

    async def check_native_tools(self, role: str) -> None:
        """Raise EndpointError unless the role's endpoint honours `tools` (its dialect forwards them):
        once per (model, backend), a request naming a tool must come back calling it, and so must a
        request that plainly asks for the tool with the choice left to the model (`auto`). A good
        answer is recorded like a call (role `tools:<role>`), so replay asks no server; a server that
        ignores tools is not recorded (fixed, the next command asks again). Memory left empty because
        the server dropped the tools would otherwise look like a model that remembered nothing."""
        rc = self.role_config(role)
        async with self._tools_lock:
            if (rc.model, rc.backend) in self._tools_checked:
                return
            for probe, messages, problem in TOOL_PROBES:
                await self._probe_tools(role, rc, probe, messages, problem)
            self._tools_checked.add((rc.model, rc.backend))

    async def _probe_tools(self, role: str, rc: RoleConfig, probe, messages: list[dict], problem: str) -> None:
        named = probe is PROBE  # the first probe's key is the one stores have held since it existed
        record = {"v": RECORD_VERSION, "tool_probe": probe.fields(), "model": rc.model, "backend": rc.backend}
        key, request_json = keyed(record if named else {**record, "messages": messages})
        if self.settings.cache in ("rw", "replay") and await self.store.get_call(key) is not None:
            return
        if self.settings.cache == "replay":
            if not named:  # a store recorded before the `auto` probe: replay contacts no server anyway
                return
            raise CacheMiss(f"tools:{role}", key)
        body = request_body(backend=rc.backend, model=rc.model, messages=messages, temperature=0.0,
                            top_p=None, max_tokens=None, seed=self.seed(role, "tool probe"), schema=None,
                            schema_name=role, tools=probe.fields())
        response, took = await self.transport.post(CHAT_PATH, rc.base_urls, rc.api_key, body, role)
        if ignores_tools(response):
            raise EndpointError(
                f"the endpoint of role {role} ({rc.backend} dialect, model {rc.model}) {problem}; serve the model "
                "with tool calling on (vLLM: --enable-auto-tool-choice and a --tool-call-parser), or set the "
                "role's backend to one that emulates tool calls (llamacpp, vllm)")
        if self.settings.cache != "off":
            self.store.put_call(key=key, role=f"tools:{role}", model=rc.model, request=request_json,
                                response=orjson.dumps({"honoured": True}).decode(), ok=True, latency=took,
                                created=_now())
            await self.store.maybe_flush()

    async def _server_count(self, role: str, rc: RoleConfig, messages: list[dict]) -> tuple[int | None, str | None]:
        if not rc.base_urls and self._start_server is not None:
            rc = await self._server_role(role)
        if not rc.base_urls:
            return None, None
        endpoint = self.transport.endpoint(server_root(rc.base_urls[0]), rc.api_key)
        try:
            count = await server_count(endpoint.session, messages, DIALECTS[rc.backend].tokenize_routes)
        except Unreachable:
            count = None
        return count, SERVER_COUNT if count is not None else None

    async def _server_role(self, role: str):
        async with self._server_lock:
            if self.settings.base_url is None:
                url = await self._start_server()
                self.settings = self.settings.with_embedded_url(url)
                if DIALECTS[self.settings.backend].serial:  # waiting here keeps queues clear of read timeouts
                    self.transport.serial_urls.add(url)
        return self.role_config(role)

    def _note_use(self, role: str, key: str, cached: bool) -> None:
        uses = _collector.get()
        if uses is not None:
            uses.append((role, key, cached))

    async def _resolve(self, role, rc, record, key, request_json, schema, check, stats) -> CallResult:
        mode = self.settings.cache
        if mode in ("rw", "replay"):
            row = await self.store.get_call(key)
            # A recorded failure (invalid output, overflow, refusal) is the outcome of that request
            # in this store: met again, it fails again without a call, so every use of a key sees
            # the same outcome whatever the order — the condition for replay to be exact.
            # `--cache refresh` asks the model again. An endpoint error recorded by an older
            # version is a misconfiguration, not an outcome: it is asked again.
            if row is not None and not _recorded_endpoint_error(row):
                stats.cache_hits += 1
                return self._from_row(role, row, key, schema, stats)
        if mode == "replay":
            raise CacheMiss(role, key)
        batch = _batching.get()
        if batch is not None:
            # Batch collecting (memaudit/llm/batch.py): the request is sent in a batch, not now.
            raise await batch.pending(role, record, key, request_json, schema)
        if not rc.base_urls and self._start_server is not None:
            rc = await self._server_role(role)
        stats.calls += 1
        try:
            await self._check_window(role, rc, record)
            outcome, usage, latency = await self._call_with_repair(role, rc, record, schema, check)
        except (InvalidOutput, ContextOverflow) as exc:
            # Failures of the request itself are recorded as its outcome, never as an answer:
            # later uses of this key fail the same way. An EndpointError (a misconfigured or
            # unreachable endpoint) ends the command and is never recorded.
            stats.failures += 1
            if mode != "off":
                self.store.put_call(**failure_row(key, role, rc.model, request_json, exc,
                                                              (rc.api_key, *self.transport.secrets.values)))
                await self.store.maybe_flush()
            raise
        self._count(stats, usage)
        if mode != "off":
            self.store.put_call(**ok_row(key, role, rc.model, request_json, outcome.raw, usage, latency,
                                         outcome.tool_calls, outcome.choices))
            await self.store.maybe_flush()
        return CallResult(outcome.raw, outcome.data, usage, key, False, outcome.tool_calls, outcome.choices)

    async def _check_window(self, role: str, rc: RoleConfig, record: dict) -> None:
        """A configured context window is checked against the server's own token count, else the
        model's tokenizer (prompt plus the output budget), before the call; never a characters-per-
        token guess, which flagged prompts at 75-100% of a real window. Without a count, the server's
        context-length error decides."""
        if not rc.context_window:
            return
        tokens = await self.count_tokens(role, record["messages"])
        if tokens is not None and tokens + (record["max_tokens"] or 0) > rc.context_window:
            raise ContextOverflow(role, tokens + (record["max_tokens"] or 0), rc.context_window,
                                  f"counted by {self.counted_by.get(role)} before the call")

    def _from_row(self, role, row, key, schema, stats) -> CallResult:
        response = orjson.loads(row["response"])
        if not row["ok"]:
            raise _failure_from_json(role, response)
        usage = response.get("usage", {})
        self._count(stats, usage)
        data = _loads_lenient(response["text"]) if schema is not None else None
        return CallResult(response["text"], data, usage, key, True, response.get("tool_calls"),
                          response.get("choices"))

    @staticmethod
    def _count(stats: RoleStats, usage: dict) -> None:
        stats.prompt_tokens += usage.get("prompt_tokens", 0)
        stats.completion_tokens += usage.get("completion_tokens", 0)
        stats.cached_tokens += usage.get("cached_tokens", 0)
        stats.reasoning_tokens += usage.get("reasoning_tokens", 0)

    async def _call_with_repair(self, role, rc, record, schema, check):
        messages = list(record["messages"])
        total = empty_usage()
        latency = 0.0
        # The embedded model's setting covers structured answers; an empty free-text reply is asked again.
        own = rc.repair_attempts if schema is not None else None
        attempts = (own if own is not None else self.settings.repair_attempts) + 1
        outcome = None
        for attempt in range(attempts):
            body = record_body(record, role, schema, await self.refusals.of(rc.model, rc.backend), messages, attempt)
            response, took = await self.transport.post(CHAT_PATH, rc.base_urls, rc.api_key, body, role)
            latency += took
            outcome = read_attempt(role, record["messages"], messages, response, schema, check, total,
                                   record.get("tools"), record.get("params"))
            if outcome.problem is None:
                return outcome, total, latency
            messages = outcome.next_messages
        failed = InvalidOutput(role, outcome.raw, outcome.problem)
        failed.latency = latency  # the time the attempts took, recorded with the failure
        failed.usage = total  # and the tokens they spent (`memaudit cost`)
        raise failed


USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")


def record_body(record: dict, role: str, schema: dict | None, refused: frozenset[str], messages: list | None = None,
                attempt: int = 0) -> dict:
    """The body that sends a keyed call's record (its `messages`, else a repair attempt's), in its
    dialect: the live path and batch collection send the same."""
    return request_body(backend=record["backend"], model=record["model"], messages=messages or record["messages"],
                        temperature=record["temperature"], top_p=record["top_p"], max_tokens=record["max_tokens"],
                        seed=record["seed"] + attempt, schema=schema, schema_name=record.get("schema_name", role),
                        reasoning_effort=record.get("reasoning_effort"), refused=refused, tools=record.get("tools"),
                        params=record.get("params"))


def empty_usage() -> dict:
    return {name: 0 for name in USAGE_FIELDS}


@dataclass
class Attempt:
    """What one answer to a call's request means: usable (`problem` None), or the problem and the
    messages of the next (repair) attempt."""
    raw: str
    data: object
    problem: str | None
    next_messages: list | None
    tool_calls: list | None = None  # a call offering tools: the calls the answer made
    choices: list | None = None  # a call forwarding logprobs or n > 1: every choice (CallResult.choices)


def read_attempt(role: str, first_messages: list, messages: list, response: dict, schema: dict | None, check,
                 total: dict, tools: dict | None = None, params: dict | None = None) -> Attempt:
    """Read one chat-completions response of a call (live, or a batch's output line): its usage is
    added to `total`; a refusal raises Refusal. Shared by both paths so that they record the same.
    Whatever goes wrong reading the answer (nesting deeper than the parser allows, a number too
    large, a type a check did not expect) makes it an invalid answer, repaired and then recorded as
    InvalidOutput like any other, so replay meets the same outcome. An answer's tool calls beyond
    MAX_TOOL_CALLS are dropped and counted (`usage["tool_calls_dropped"]`)."""
    raw, finish, usage = parse_choice(response)
    for name in USAGE_FIELDS:
        total[name] += usage.get(name, 0)
    if "unknown" in usage:  # one attempt without counts leaves the call's tokens unknown
        total["unknown"] = usage["unknown"]
    if finish == "refusal":
        refused = Refusal(role, raw)
        refused.usage = dict(total)
        raise refused
    try:
        calls = None if tools is None else answered_calls(response)
        found, data = (_validate(raw, finish, schema, check) if tools is None
                       else (_tools_problem(raw, finish, tools, calls), None))
    except Exception as exc:  # an answer too deep, too large or of a type a check did not expect
        calls, data = None, None
        found = f"the answer could not be read ({type(exc).__name__}: {str(exc)[:100]})"
    if found is None:
        if finish == "length":
            total["truncated"] = 1
        if calls is not None and len(calls) > MAX_TOOL_CALLS:  # the rest are counted, never run
            total["tool_calls_dropped"] = len(calls) - MAX_TOOL_CALLS
            calls = calls[:MAX_TOOL_CALLS]
        return Attempt(raw, data, None, None, calls, answer_choices(response, params))
    if schema is None:  # free text (or tool calls): an unusable answer is asked again as is
        return Attempt(raw, data, found, messages)
    return Attempt(raw, data, found, list(first_messages) + [
        {"role": "assistant", "content": raw}, {"role": "user", "content": REPAIR_MESSAGE.format(problem=found)}])


def ok_row(key: str, role: str, model: str, request_json: str, text: str, usage: dict, latency: float,
           tool_calls: list | None = None, choices: list | None = None) -> dict:
    """The cache row of a usable answer (the live path and batch collection store the same); the
    tool calls of an answer to a request offering tools, and the choices of one forwarding logprobs
    or n > 1, are kept beside its text (only then: every other row stays as it was)."""
    answer = {"text": text, "usage": usage}
    for name, value in (("tool_calls", tool_calls), ("choices", choices)):
        if value is not None:
            answer[name] = value
    return dict(key=key, role=role, model=model, request=request_json,
                response=orjson.dumps(answer).decode(), ok=True, latency=latency, created=_now(),
                **_token_columns(usage))


def _token_columns(usage: dict) -> dict:
    return {name: usage.get(name, 0) for name in USAGE_FIELDS}


def failure_row(key: str, role: str, model: str, request_json: str, exc: InvalidOutput | ContextOverflow,
                secrets) -> dict:
    """The cache row of a request that failed as itself (invalid output, overflow, refusal), with the
    time its attempts took (`memaudit calls` counts what failures cost, not only answers)."""
    usage = getattr(exc, "usage", None) or {}
    return dict(key=key, role=role, model=model, request=request_json, response=_failure_json(exc, secrets),
                ok=False, latency=getattr(exc, "latency", 0.0), created=_now(), **_token_columns(usage))


def _validate(raw: str, finish: str | None, schema: dict | None, check) -> tuple[str | None, object]:
    if finish == "malformed":
        return "the response had no message", None
    if schema is None:
        # A free-text reply cut at max_tokens is still the reply the model gave (the role's token
        # budget is part of the protocol); it is kept and flagged in usage["truncated"]. Cut-off
        # structured output is invalid JSON and goes through repair.
        return (None, None) if raw.strip() else ("the answer was empty", None)
    if finish == "length":
        return "the answer was cut off at the token limit; answer more briefly", None
    try:
        data = _loads_lenient(raw)
    except orjson.JSONDecodeError:
        return "the answer was not valid JSON", None
    found = schema_problem(data, schema)
    if found is None and check is not None:
        found = check(data)
    return found, data


def _tools_problem(raw: str, finish: str | None, tools: dict, calls: list[dict]) -> str | None:
    """Why an answer to a request offering tools cannot be used: no message, a call the request does
    not allow, no call where one is required, or neither a call nor text."""
    if finish == "malformed":
        return "the response had no message"
    found = calls_problem(tools, calls)
    if found is None and not calls and not raw.strip():
        return "the answer was empty"
    return found


def _loads_lenient(raw: str):
    """JSON, forgiving the one slip grammar-constrained small models make often: `\\'` (an escape
    JSON does not have) for an apostrophe. Anything else invalid stays invalid."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        if "\\'" not in raw:
            raise
        return orjson.loads(raw.replace("\\'", "'"))


def _failure_json(exc: InvalidOutput | ContextOverflow, secrets) -> str:
    """The recorded outcome of a failed request, without credentials."""
    payload: dict = {"error_kind": type(exc).__name__, "error": str(exc)}
    if isinstance(exc, InvalidOutput):
        payload.update(raw=exc.raw, problem=exc.problem)
        if getattr(exc, "usage", None):
            payload.update(usage=exc.usage)
    if isinstance(exc, ContextOverflow):
        payload.update(tokens=exc.tokens, window=exc.window)
    return orjson.dumps({k: scrub(v, secrets) if isinstance(v, str) else v for k, v in payload.items()}).decode()


def _recorded_endpoint_error(row) -> bool:
    return not row["ok"] and orjson.loads(row["response"]).get("error_kind") == "EndpointError"


def _failure_from_json(role: str, payload: dict) -> Exception:
    kind = payload.get("error_kind")
    if kind == "Refusal":
        return Refusal(role, payload.get("raw", ""))
    if kind == "ContextOverflow":
        return ContextOverflow(role, payload.get("tokens"), payload.get("window"), "recorded")
    return InvalidOutput(role, payload.get("raw", ""), payload.get("problem", ""))


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
