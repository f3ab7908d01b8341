"""Content-addressed call cache keys.

The key is a scheme-prefixed sha256 over canonical JSON (orjson, sorted keys) of a versioned record
of everything that changes the output. The API key, endpoint host, timeouts, retry and
concurrency settings are deliberately absent: they change how a call is made, not its answer.
"""
from __future__ import annotations

import hashlib

from memaudit.canonical import canonical

SCHEME = "s1"
RECORD_VERSION = 1
# Text hashes (embedding vectors, oracle verdicts, memory search seeds) have their own scheme: a
# new call-key scheme must not silently re-key them. Its value is the one stores already hold.
TEXT_HASH_SCHEME = "s1"


def key_record(*, model: str, backend: str, messages: list[dict], temperature: float | None, top_p: float | None,
               max_tokens: int | None, seed: int, schema: dict | None, sample: int,
               reasoning_effort: str | None = None, tools: dict | None = None,
               schema_name: str | None = None, params: dict | None = None) -> dict:
    """What is sent: a None temperature or top_p was left out of the request (the model's default).
    `reasoning_effort`, `tools` (the tool fields sent natively: memaudit/llm/tools.py), a schema's
    own name (else the role names it) and `params` (a library's other sampling parameters as it sent
    them: memaudit/llm/dialects FORWARDED) are keyed only when set, so the keys of every other call
    stay as they were."""
    record = {"v": RECORD_VERSION, "model": model, "backend": backend, "messages": messages,
              "temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "seed": seed,
              "schema": schema, "sample": sample}
    if reasoning_effort is not None:
        record["reasoning_effort"] = reasoning_effort
    if tools:
        record["tools"] = tools
    if schema_name is not None:
        record["schema_name"] = schema_name
    if params:
        record["params"] = params
    return record


def keyed(record: dict) -> tuple[str, str]:
    """(cache key, the canonical JSON it hashes): the JSON is what the calls table stores."""
    data = canonical(record)
    return f"{SCHEME}:{hashlib.sha256(data).hexdigest()}", data.decode()


def derive_seed(base: int, role: str, *parts) -> int:
    """Per-call seed from (base seed, role, user, task, turn …): stable across processes."""
    digest = hashlib.sha256(canonical([base, role, *parts])).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def text_hash(text: str) -> str:
    return f"{TEXT_HASH_SCHEME}:{hashlib.sha256(text.encode()).hexdigest()}"
