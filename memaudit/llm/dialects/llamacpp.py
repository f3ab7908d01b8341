"""llama.cpp's server (llama-cpp-python, the embedded model): structured output as `json_object`
with the schema beside it (the OpenAI `json_schema` type is rejected), `max_tokens`. A model
served by llama.cpp takes the sampling parameters whatever it is called."""
from __future__ import annotations

from memaudit.llm.tools import EMULATED

NAME = "llamacpp"
# Tool calls are emulated by structured output: the embedded server's chat formats ignore `tools`.
TOOL_CALLS = EMULATED


def is_reasoning_model(model: str) -> bool:
    return False


def max_tokens_field(refused: frozenset[str]) -> str:
    return "max_completion_tokens" if "max_tokens" in refused else "max_tokens"


def response_format(schema: dict, name: str) -> dict:
    return {"type": "json_object", "schema": schema}
