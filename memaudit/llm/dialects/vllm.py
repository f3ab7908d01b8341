"""vLLM's OpenAI-compatible server: structured output as `json_schema` with a name and a schema
(the old `guided_json` fields are silently ignored by current vLLM), `max_tokens`. A model served
by vLLM takes the sampling parameters whatever it is called."""
from __future__ import annotations

from memaudit.llm.tools import EMULATED

NAME = "vllm"
# Tool calls are emulated by structured output: `tool_choice: auto` needs a server started with a tool
# parser (`--enable-auto-tool-choice --tool-call-parser …`), which memaudit cannot see from here.
TOOL_CALLS = EMULATED


def is_reasoning_model(model: str) -> bool:
    return False


def max_tokens_field(refused: frozenset[str]) -> str:
    return "max_completion_tokens" if "max_tokens" in refused else "max_tokens"


def response_format(schema: dict, name: str) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
