"""The OpenAI API and the hosted services that copy it: strict `json_schema` structured output,
`max_completion_tokens`, and reasoning models recognised by name.

Hosted reasoning models (gpt-5.x, the o-series) refuse `max_tokens` (they take
`max_completion_tokens`, which every current hosted chat model accepts). Some of them also refuse a
`temperature` or `top_p` other than their default, others take it (the published study's
gpt-5.4-mini took 0, 0.7 and 0.85): the name decides only the reasoning budget; a refused
parameter is learned from the server's 400 (memaudit/llm/dialects/__init__.py `sent_fields`).

`--backend openai` also names any OpenAI-compatible server not otherwise declared: its prompts are
counted at whichever known tokenize route answers."""
from __future__ import annotations

import re

from memaudit.llm.dialects.base import LLAMA_CPP_PYTHON_TOKENIZE, LLAMA_CPP_TOKENIZE, VLLM_TOKENIZE, Dialect

# gpt-5, gpt-5.4-mini, o1, o3-mini, o4-mini …, also behind a provider prefix ("openai/gpt-5") and
# as a fine-tune ("ft:gpt-5-mini:org::id").
REASONING_MODEL = re.compile(r"(^|[/:])(gpt-5|o\d)([-._:]|$)", re.I)
# String-length bounds are not accepted by every strict structured-output API; they are still
# checked locally on the answer (memaudit/llm/schema.py).
_NOT_STRICT = ("minLength", "maxLength")
_STRICT_MEMO: dict[int, tuple[dict, dict, bool]] = {}


class OpenAI(Dialect):
    name = "openai"
    batch_api = True
    # A hosted API has none; a server of unknown kind may have one of the known ones.
    tokenize_routes = (LLAMA_CPP_TOKENIZE, VLLM_TOKENIZE, LLAMA_CPP_PYTHON_TOKENIZE)
    native_tools = True

    def is_reasoning_model(self, model: str) -> bool:
        return REASONING_MODEL.search(model) is not None

    def max_tokens_field(self, refused: frozenset[str]) -> str:
        # The OpenAI API took `max_tokens` as the old name; its reasoning models accept only the new one.
        return "max_completion_tokens"

    def response_format(self, schema: dict, name: str) -> dict:
        # Strict mode takes a schema only when every object requires all its properties and allows no
        # others (every schema of memaudit's roles); another one (A-Mem's content analysis, with the
        # published pack) goes as its authors sent it, without `strict`.
        sent, strict = _strict(schema)
        return {"type": "json_schema", "json_schema": {"name": name, "schema": sent, **({"strict": True} if strict
                                                                                       else {})}}


def _strict(schema: dict) -> tuple[dict, bool]:
    """(the schema without length bounds, whether strict mode takes it), made once per schema object
    (roles reuse theirs on every call)."""
    memo = _STRICT_MEMO.get(id(schema))
    if memo is None or memo[0] is not schema:
        if len(_STRICT_MEMO) > 256:  # schemas built per call would otherwise pile up
            _STRICT_MEMO.clear()
        memo = _STRICT_MEMO[id(schema)] = (schema, _without_length_bounds(schema), _strict_ready(schema))
    return memo[1], memo[2]


def _strict_ready(schema) -> bool:
    """Every object in the schema lists all its properties as required and forbids others."""
    if isinstance(schema, list):
        return all(_strict_ready(v) for v in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or set(schema.get("required", ())) != set(properties):
            return False
    return all(_strict_ready(v) for v in schema.values())


def _without_length_bounds(schema):
    if isinstance(schema, dict):
        return {k: _without_length_bounds(v) for k, v in schema.items() if k not in _NOT_STRICT}
    if isinstance(schema, list):
        return [_without_length_bounds(v) for v in schema]
    return schema
