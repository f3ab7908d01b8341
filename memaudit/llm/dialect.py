"""What a chat-completions request carries on each kind of endpoint: the structured-output
dialect (`openai`, `vllm`, `llamacpp`) and the quirks of hosted reasoning models.

Hosted reasoning models (gpt-5.x, the o-series) refuse `max_tokens` (they take
`max_completion_tokens`, which every current hosted chat model accepts) and any `temperature` or
`top_p` other than their default. For them the sampling parameters are left out of the request,
and so out of the cache key: the key and the run record hold what was sent, so a replay is exact
and a table can say that a role ran at the model's default temperature. A model that is not
recognised by its name but answers a 400 naming one of these parameters is asked again without it
and remembered as refusing it, in the store (`param_refusals`), so every later call, process and
replay keys its requests the same way."""
from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from memaudit.caches import CallCache
from memaudit.errors import EndpointError

# gpt-5, gpt-5.4-mini, o1, o3-mini, o4-mini …, also behind a provider prefix ("openai/gpt-5") and
# as a fine-tune ("ft:gpt-5-mini:org::id").
REASONING_MODEL = re.compile(r"(^|[/:])(gpt-5|o\d)([-._:]|$)", re.I)
# Parameters a model may refuse (a 400 naming them): `max_tokens` is then sent under its new name
# `max_completion_tokens`; a sampling parameter is left out (the model uses its default).
REFUSABLE = ("max_tokens", "temperature", "top_p")
# Reasoning tokens are spent from the completion budget before the visible answer: a role's budget
# sized for the answer alone would end most replies empty. The published runner gave reasoning
# models 8192 completion tokens on every call; a role's `max_tokens` in the config still wins.
REASONING_BUDGET = 8192
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
# Where a chat request goes, below the base URL (which ends in /v1), and the same endpoint as a
# batch input line names it (OpenAI's Batch API and vLLM's batch runner both take `/v1/...`).
CHAT_PATH = "/chat/completions"
BATCH_CHAT_URL = "/v1" + CHAT_PATH


class ParameterRefused(EndpointError):
    """The endpoint answered 400 naming a request parameter this model does not take."""

    def __init__(self, param: str, message: str, *, url: str | None = None, secrets=()):
        super().__init__(message, status=400, url=url, secrets=secrets)
        self.param = param


def is_reasoning_model(model: str) -> bool:
    return REASONING_MODEL.search(model) is not None


@dataclass(frozen=True)
class Sent:
    """The sampling fields of a request as they are sent (None = left out: the model's default)."""
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    reasoning_effort: str | None


def sent_fields(*, model: str, backend: str, temperature: float | None, top_p: float | None,
                max_tokens: int | None, budget_configured: bool, reasoning_effort: str | None,
                refused: frozenset[str]) -> Sent:
    """The fields a call to `model` sends, given what the role asks for and what the model refuses.
    Names are recognised on the `openai` dialect only: a model served by vLLM or llama.cpp takes
    the sampling parameters whatever it is called."""
    reasoning = backend == "openai" and is_reasoning_model(model)
    if reasoning and not budget_configured:
        max_tokens = max(max_tokens or 0, REASONING_BUDGET)
    if reasoning or "temperature" in refused:
        temperature = None
    if reasoning or "top_p" in refused:
        top_p = None
    return Sent(temperature, top_p, max_tokens, reasoning_effort)


def request_body(*, backend: str, model: str, messages: list[dict], temperature: float | None,
                 top_p: float | None, max_tokens: int | None, seed: int, schema: dict | None, schema_name: str,
                 reasoning_effort: str | None = None, refused: frozenset[str] = frozenset()) -> dict:
    """The chat-completions body in the endpoint's dialect; a None field is left out."""
    body: dict = {"model": model, "messages": messages, "seed": seed}
    if temperature is not None:
        body["temperature"] = temperature
    if top_p is not None:
        body["top_p"] = top_p
    if max_tokens is not None:
        # The OpenAI API took `max_tokens` as the old name; its reasoning models accept only the new one.
        new_name = backend == "openai" or "max_tokens" in refused
        body["max_completion_tokens" if new_name else "max_tokens"] = max_tokens
    if reasoning_effort is not None:
        body["reasoning_effort"] = reasoning_effort
    if schema is not None:
        name = re.sub(r"[^A-Za-z0-9_-]", "_", schema_name)[:64]
        if backend == "llamacpp":
            body["response_format"] = {"type": "json_object", "schema": schema}
        elif backend == "vllm":
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        else:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": name, "schema": _strict(schema), "strict": True}}
    return body


# String-length bounds are not accepted by every strict structured-output API; they are still
# checked locally on the answer (memaudit/llm/schema.py).
_NOT_STRICT = ("minLength", "maxLength")


_STRICT_MEMO: dict[int, tuple[dict, dict]] = {}


def _strict(schema: dict) -> dict:
    """The strict form of a schema, made once per schema object (roles reuse theirs on every call)."""
    memo = _STRICT_MEMO.get(id(schema))
    if memo is None or memo[0] is not schema:
        if len(_STRICT_MEMO) > 256:  # schemas built per call would otherwise pile up
            _STRICT_MEMO.clear()
        memo = _STRICT_MEMO[id(schema)] = (schema, _without_length_bounds(schema))
    return memo[1]


def _without_length_bounds(schema):
    if isinstance(schema, dict):
        return {k: _without_length_bounds(v) for k, v in schema.items() if k not in _NOT_STRICT}
    if isinstance(schema, list):
        return [_without_length_bounds(v) for v in schema]
    return schema


def refusal(status: int, data: bytes, message: str, url: str, secrets=()) -> EndpointError:
    """The error for a non-retryable answer (`data` is its body): ParameterRefused when a 400 names
    a parameter memaudit can do without (`param`, as the OpenAI API reports it), else a plain
    EndpointError."""
    param = None
    if status == 400:
        try:
            error = orjson.loads(data).get("error")
        except (orjson.JSONDecodeError, AttributeError):
            error = None
        if isinstance(error, dict) and error.get("param") in REFUSABLE:
            param = error["param"]
    if param is not None:
        return ParameterRefused(param, message[:300], url=url, secrets=secrets)
    return EndpointError(message[:300], status=status, url=url, secrets=secrets)


class Refusals:
    """Which parameters each model refuses, per (model, dialect) — the same identity a cache key
    gives an answerer, so a store replayed or merged elsewhere keys its calls the same way."""

    def __init__(self, cache: CallCache):
        self.cache = cache
        self._known: dict[tuple[str, str], set[str]] | None = None

    async def of(self, model: str, backend: str) -> frozenset[str]:
        if self._known is None:
            known: dict[tuple[str, str], set[str]] = {}
            for refused_model, refused_backend, param in await self.cache.refused_params():
                known.setdefault((refused_model, refused_backend), set()).add(param)
            if self._known is None:  # concurrent first calls: the first to finish reading wins
                self._known = known
        return frozenset(self._known.get((model, backend), ()))

    async def learn(self, model: str, backend: str, param: str) -> None:
        await self.of(model, backend)
        known = self._known.setdefault((model, backend), set())
        if param not in known:
            known.add(param)
            await self.cache.record_refusal(model, backend, param)
