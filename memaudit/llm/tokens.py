"""Token counts for context-window checks, from the server's own tokenizer, else the model's.

A server counts at the tokenize routes its dialect names (memaudit/llm/dialects/: llama.cpp's,
vLLM's, llama-cpp-python's), all answering {"tokens": [...]}. For a server with none, the
model's own tokenizer counts when it is on this machine (`tokenizer.json` of a local model
directory named as the model, or of the model in the Hugging Face cache; read offline, never
downloaded). With neither (a hosted API), the call is made and the server's context-length error
decides. There is no characters-per-token guess: it flagged prompts at 75-100% of a real window.

`estimate_tokens` stays for one job only: longctx_full's choice of which old history to drop when a
window is configured (docs/fidelity.md), where a generous estimate errs on the safe side."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import orjson
from yarl import URL

CHARS_PER_TOKEN = 3
PER_MESSAGE = 4
# Tokens a chat template adds around each message: the counts below tokenize the contents only.
TEMPLATE_TOKENS_PER_MESSAGE = 4


def estimate_tokens(messages: list[dict]) -> int:
    return sum(PER_MESSAGE + -(-len(str(m.get("content", ""))) // CHARS_PER_TOKEN) for m in messages)


def server_root(base_url: str) -> str:
    """`http://host:8080/v1` -> `http://host:8080`: the tokenize routes sit beside /v1 (a query,
    such as a key some hosts take as `?api-key=…`, stays)."""
    url = URL(base_url)
    path = url.path.rstrip("/")
    return str(url.with_path(path[:-3] if path.endswith("/v1") else path).with_query(url.query)).rstrip("/")


async def server_count(session, messages: list[dict], routes) -> int | None:
    """The server's token count of the messages (contents plus the template's few tokens each) at
    the first of its dialect's tokenize `routes` that answers, or None when none does."""
    text = "".join(str(m.get("content", "")) for m in messages)
    for route in routes:
        status, _, body = await session.post(route.path, orjson.dumps(route.body(text)))
        if status == 200:
            tokens = orjson.loads(body).get("tokens")
            if isinstance(tokens, list):
                return len(tokens) + TEMPLATE_TOKENS_PER_MESSAGE * len(messages)
    return None


def tokenizer_file(model: str) -> Path | None:
    """The model's `tokenizer.json` on this machine, offline: a local model directory, else the
    Hugging Face cache (`HF_HUB_CACHE` or its default); None when there is none."""
    local = Path(model).expanduser() / "tokenizer.json"
    if local.is_file():
        return local
    try:
        from huggingface_hub import try_to_load_from_cache
        found = try_to_load_from_cache(model, "tokenizer.json", cache_dir=hub_cache())
    except (ImportError, ValueError, OSError):  # a model name that is no repository id, no hub library
        return None
    return Path(found) if isinstance(found, str) else None


def hub_cache() -> str:
    """The Hugging Face cache folder as the environment names it now. huggingface_hub reads the
    environment once, when it is first imported: its own default would keep whatever folder was
    named then (a test's, or another command's in the same process)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return os.path.join(os.path.expanduser(home), "hub")


@lru_cache(maxsize=8)
def _tokenizer(path: str):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(path)


def local_count(model: str, messages: list[dict]) -> tuple[int, str] | None:
    """(tokens, which tokenizer counted) by the model's own tokenizer, counted like `server_count`;
    None when it is not on this machine."""
    path = tokenizer_file(model)
    if path is None:
        return None
    text = "".join(str(m.get("content", "")) for m in messages)
    tokens = len(_tokenizer(str(path)).encode(text, add_special_tokens=False).ids)
    return tokens + TEMPLATE_TOKENS_PER_MESSAGE * len(messages), f"the model's tokenizer ({path})"


def counting(model: str) -> str:
    """How prompts of `model` are measured against a window: a run's provenance records it."""
    path = tokenizer_file(model)
    fallback = f"the model's tokenizer ({path})" if path else \
        f"the server's context-length error (no tokenizer for {model} on this machine)"
    return f"the server's /tokenize, else {fallback}"


SERVER_COUNT = "the server's /tokenize"
