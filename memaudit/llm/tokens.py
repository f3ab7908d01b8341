"""Token counts for context-window checks, from the server's own tokenizer.

llama.cpp's server tokenizes at `POST /tokenize` ({"content"}), llama-cpp-python's at
`POST /extras/tokenize` ({"input"}); both answer {"tokens": [...]}. A server with neither (a hosted
API) has no count: the call is made and the server's context-length error decides. There is no
characters-per-token guess: it flagged prompts at 75-100% of a real window.

`estimate_tokens` stays for one job only: longctx_full's choice of which old history to drop when a
window is configured (docs/fidelity.md), where a generous estimate errs on the safe side."""
from __future__ import annotations

import orjson

CHARS_PER_TOKEN = 3
PER_MESSAGE = 4
# Tokens a chat template adds around each message: the counts below tokenize the contents only.
TEMPLATE_TOKENS_PER_MESSAGE = 4
TOKENIZE_ROUTES = (("/tokenize", "content"), ("/extras/tokenize", "input"))


def estimate_tokens(messages: list[dict]) -> int:
    return sum(PER_MESSAGE + -(-len(str(m.get("content", ""))) // CHARS_PER_TOKEN) for m in messages)


def server_root(base_url: str) -> str:
    """`http://host:8080/v1` -> `http://host:8080`: the tokenize routes sit beside /v1."""
    root = base_url.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


async def server_count(session, messages: list[dict]) -> int | None:
    """The server's token count of the messages (contents plus the template's few tokens each), or
    None when it has no tokenize route."""
    text = "".join(str(m.get("content", "")) for m in messages)
    for path, field in TOKENIZE_ROUTES:
        status, _, body = await session.post(path, orjson.dumps({field: text}))
        if status == 200:
            tokens = orjson.loads(body).get("tokens")
            if isinstance(tokens, list):
                return len(tokens) + TEMPLATE_TOKENS_PER_MESSAGE * len(messages)
    return None
