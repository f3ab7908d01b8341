"""Token estimates for context-window checks before a call (no tokenizer is shipped for every model).

Three characters per token overestimates English prose and is close for JSON-heavy prompts, so an
estimate over the window is a reliable sign the call would fail; the server's own context-length
error catches what slips through."""
from __future__ import annotations

CHARS_PER_TOKEN = 3
PER_MESSAGE = 4


def estimate_tokens(messages: list[dict]) -> int:
    return sum(PER_MESSAGE + -(-len(str(m.get("content", ""))) // CHARS_PER_TOKEN) for m in messages)
