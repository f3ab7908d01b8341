"""The dialects of the servers memaudit speaks to, one class each (base.py: a generic
OpenAI-compatible server; openai.py, vllm.py, llamacpp.py refine it), registered by name in
DIALECTS; `--backend` and a role's `backend` name one. A class holds every quirk of its server
(structured output, token cap, reasoning models, tokenize routes, serial serving, engine command,
batch runner, tool calls: base.py). Here is what they share: the parameters actually sent, what an
answer means (its text, finish reason and usage), what an error answer means (the same error shapes
on all three), and the embeddings request and answer (`/v1/embeddings`, alike on all three).

Every role is sent its temperature, whatever the model's name (the published runner sent one on
every call, and the study's gpt-5.4-mini took them). A model that answers a 400 naming one of
these parameters is asked again without it and remembered as refusing it, in the store
(`param_refusals`), so every later call, process and replay keys its requests the same way; the
key and the call record hold what was sent (a left-out temperature is null: the model's default),
and a rollout records the adaptation in its run's provenance (memaudit/provenance.py `adapted`)."""
from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from memaudit.caches import CallCache
from memaudit.config import RoleConfig
from memaudit.errors import ContextOverflow, EndpointError, Refusal
from memaudit.llm.dialects.base import Dialect
from memaudit.llm.dialects.llamacpp import LlamaCpp
from memaudit.llm.dialects.openai import OpenAI
from memaudit.llm.dialects.vllm import VLLM

# The sampling parameters of a library's request that the recording proxy forwards as the library
# sent them (memaudit/llm/proxy.py), keyed with the call (`params`: memaudit/llm/keys.py). Beside
# them the proxy forwards temperature and max_tokens (every call's own fields) and tools.
FORWARDED = ("top_p", "stop", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias",
             "n", "seed", "response_format")
# Parameters a model may refuse (a 400 naming them): `max_tokens` is then sent under its new name
# `max_completion_tokens`; a sampling parameter is left out (the model uses its default).
REFUSABLE = ("max_tokens", "temperature", *FORWARDED)
# Reasoning tokens are spent from the completion budget before the visible answer: a role's budget
# sized for the answer alone would end most replies empty. The published runner gave reasoning
# models 8192 completion tokens on every call; a role's `max_tokens` in the config still wins.
REASONING_BUDGET = 8192
DIALECTS: dict[str, Dialect] = {dialect.name: dialect for dialect in (OpenAI(), VLLM(), LlamaCpp())}
# The dialects whose server `memaudit serve --engine NAME` can start.
ENGINES = tuple(name for name, dialect in DIALECTS.items()
                if type(dialect).engine_command is not Dialect.engine_command)
# Where a chat request goes, below the base URL (which ends in /v1), and the same endpoint as a
# batch input line names it (OpenAI's Batch API and vLLM's batch runner both take `/v1/...`).
CHAT_PATH = "/chat/completions"
BATCH_CHAT_URL = "/v1" + CHAT_PATH
# Where an embeddings request goes, below the base URL: OpenAI's API, vLLM serving an embedding
# model and llama.cpp's server (started with --embedding) take the same request and answer.
EMBEDDINGS_PATH = "/embeddings"
# The most tokens a server may report for one call: a thousand times the largest context window
# served today. A count above it (2^63, 1e308) is no count: the call's tokens are unknown.
MAX_USAGE_TOKENS = 10**9
# What an error answer means: the same shapes from every dialect's servers.
RETRYABLE = {408, 409, 425, 429}
OVERFLOW_PATTERN = re.compile(
    r"context[ _-]?length|context window|maximum context|too many tokens|prompt is too long|"
    r"exceed(s|ed)? (the )?(context|max)|context_length_exceeded|n_ctx", re.I)
# Error codes and words with which hosted APIs refuse the content of a request (not its form).
REFUSAL_PATTERN = re.compile(r"content[ _-]?(policy|filter|management)|safety system|flagged|moderation", re.I)


class ParameterRefused(EndpointError):
    """The endpoint answered 400 naming a request parameter this model does not take."""

    def __init__(self, param: str, message: str, *, url: str | None = None, secrets=()):
        super().__init__(message, status=400, url=url, secrets=secrets)
        self.param = param


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
    A sampling parameter is left out only when the model refused it, never for its name; the
    reasoning budget goes by name (the dialect's call: recognised by name on `openai`), as the
    published runner's did."""
    if DIALECTS[backend].is_reasoning_model(model) and not budget_configured:
        max_tokens = max(max_tokens or 0, REASONING_BUDGET)
    if "temperature" in refused:
        temperature = None
    if "top_p" in refused:
        top_p = None
    return Sent(temperature, top_p, max_tokens, reasoning_effort)


def sampling(rc: RoleConfig, temperature: float | None, max_tokens: int | None, *,
             refused: frozenset[str] = frozenset()) -> Sent:
    """What a call of a role configured as `rc` asking for (temperature, max_tokens) sends: the
    role's configured values win, the embedded model's cap applies unless max_tokens was
    configured, then this dialect's rules for the model (a reasoning model gets the reasoning
    budget; `refused` are the parameters this model answered a 400 for, left out)."""
    temperature = rc.temperature if rc.temperature is not None else temperature
    max_tokens = rc.max_tokens if rc.max_tokens is not None else max_tokens
    if rc.max_tokens_cap is not None and rc.max_tokens is None:
        max_tokens = min(max_tokens or rc.max_tokens_cap, rc.max_tokens_cap)
    return sent_fields(model=rc.model, backend=rc.backend, temperature=temperature, top_p=None,
                       max_tokens=max_tokens, budget_configured=rc.max_tokens is not None,
                       reasoning_effort=rc.reasoning_effort, refused=refused)


def request_body(*, backend: str, **fields) -> dict:
    """The chat-completions body in the dialect `backend` (base.py `Dialect.request_body`)."""
    return DIALECTS[backend].request_body(**fields)


def forwarded_params(request: dict) -> dict:
    """The FORWARDED parameters of a library's request, as it sent them (None: not sent)."""
    return {name: request[name] for name in FORWARDED if request.get(name) is not None}


def not_refused(params: dict | None, refused: frozenset[str]) -> dict | None:
    """Forwarded parameters but those the model refused (a 400 naming one): left out, the model's
    default, as a role's own temperature is; None when none is left (keyed as a call without)."""
    kept = {name: value for name, value in (params or {}).items() if name not in refused}
    return kept or None


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


def answer_choices(response: dict, params: dict | None) -> list | None:
    """Every choice of an answer, as the server gave it, when the request forwarded `logprobs` or
    `n` > 1 (the library reads them: a reranker's token probabilities, several samples); else None."""
    if not params or not (params.get("logprobs") or (params.get("n") or 1) > 1):
        return None
    choices = response.get("choices") if isinstance(response, dict) else None
    return [{"index": choice.get("index", n), "message": _fields(choice.get("message")),
             "finish_reason": choice.get("finish_reason"), "logprobs": choice.get("logprobs")}
            for n, choice in enumerate(choices or []) if isinstance(choice, dict)]


def parse_choice(response: dict) -> tuple[str, str | None, dict]:
    """(text, finish reason, usage) of a chat-completions answer; finish "malformed" when it has no
    message, "refusal" when the model or a content filter refused."""
    try:
        choice = response["choices"][0]
        message = choice["message"]
        text = _content_text(message.get("content"))
        finish = choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        return "", "malformed", {}
    if message.get("refusal") or finish == "content_filter":  # OpenAI's refusal field, a content filter
        text, finish = str(message.get("refusal") or text or "the content filter stopped the answer"), "refusal"
    usage = _fields(response.get("usage"))
    details, completion = _fields(usage.get("prompt_tokens_details")), _fields(usage.get("completion_tokens_details"))
    tokens = {"prompt_tokens": _tokens(usage.get("prompt_tokens")),
              "completion_tokens": _tokens(usage.get("completion_tokens")),
              "cached_tokens": _tokens(details.get("cached_tokens")),
              "reasoning_tokens": _tokens(completion.get("reasoning_tokens"))}
    unknown = _usage_unknown(response.get("usage"))
    return text, finish, tokens if unknown is None else {**tokens, "unknown": unknown}


def _usage_unknown(usage) -> str | None:
    """Why a server's answer gives no token counts (None: it gives them): the call is recorded with
    unknown tokens, which `cost` reports as unpriced, never as 0."""
    if not isinstance(usage, dict):
        return "the server sent no usage"
    counts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    if not all(_count(v) for v in counts):
        return "the server's usage has no numeric prompt and completion tokens"  # (counts from 0 to the bound)
    return None


def reported_tokens(usage) -> int | None:
    """Prompt plus completion tokens of a server's usage, or None unless both are valid counts: what
    the rate budget settles a request with (never a crash, never a credit for a negative count)."""
    if not isinstance(usage, dict) or _usage_unknown(usage) is not None:
        return None
    return _tokens(usage["prompt_tokens"]) + _tokens(usage["completion_tokens"])


def embeddings_body(model: str, texts: list[str]) -> dict:
    return {"model": model, "input": texts}


def parse_embeddings(response, count: int) -> list[list[float]] | None:
    """The vectors of an embeddings answer in input order (each row names its input's `index`), or
    None unless it holds one vector of numbers per input, all of one length."""
    rows = response.get("data") if isinstance(response, dict) else None
    if not isinstance(rows, list) or len(rows) != count or not all(isinstance(row, dict) for row in rows):
        return None
    by_index = {row.get("index"): row.get("embedding") for row in rows}
    vectors = [by_index.get(i) for i in range(count)]
    if not all(_is_vector(v) for v in vectors) or len({len(v) for v in vectors}) > 1:
        return None
    return vectors


def _is_vector(value) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)


# The server controls every field below: an odd one must never crash the client.
def _content_text(content) -> str:
    """A message's text: a string, or (a valid OpenAI shape) a list of parts whose text parts are
    joined; anything else is no text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content
                       if isinstance(part, dict) and part.get("type") in ("text", "output_text", None)
                       and isinstance(part.get("text"), str))
    return ""


def _fields(value) -> dict:
    return value if isinstance(value, dict) else {}


def _tokens(value) -> int:
    """A token count as reported, or 0 when it is none (`_count`): "abc", -1, 1.5, null, 1e20."""
    return int(value) if _count(value) else 0


def _count(value) -> bool:
    """Whether a server's token count is one: a whole number from 0 to MAX_USAGE_TOKENS (a float
    holding a whole number, as some servers send, included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return 0 <= value <= MAX_USAGE_TOKENS and (isinstance(value, int) or value.is_integer())


def answer_error(status: int, data: bytes, role: str, url: str, secrets=()) -> Exception | None:
    """What a non-200 answer to a chat request means (live, or a batch's error line): the request's
    own outcome (ContextOverflow, Refusal), a refusal of its form (ParameterRefused, EndpointError),
    or None: a retryable status, to be asked again."""
    message, code = server_message(data)
    said = f"{message} {code}"
    if status in (400, 413, 422, 500) and OVERFLOW_PATTERN.search(said):
        return ContextOverflow(role, None, None, message[:200])
    if status in (400, 403, 422) and REFUSAL_PATTERN.search(said):
        return Refusal(role, message[:300])
    if status not in RETRYABLE and status < 500:
        return refusal(status, data, message, url, secrets)
    return None


def server_message(data: bytes) -> tuple[str, str]:
    """(message, error code) of an error body, whatever shape the server gives it."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", "replace").strip() or "(empty body)", ""
    err = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(err, dict):
        return str(err.get("message") or err.get("detail") or err), str(err.get("code") or err.get("type") or "")
    return str(err), ""
