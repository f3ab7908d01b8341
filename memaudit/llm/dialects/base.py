"""What an OpenAI-compatible server is, when nothing else is known about it: the base every
dialect refines. A dialect holds every quirk of its kind of server, so a new quirk touches its
class only:

    structured output   how the output schema is asked for (`response_format`), what the token cap
                        is called (`max_tokens_field`), which models are reasoning models
    tokenize routes     where the server counts a prompt's tokens, beside /v1 (llm/tokens.py)
    serial              the server answers one request at a time
    engine              the command that starts such a server (`memaudit serve --engine NAME`)
    batch API           whether the server takes OpenAI's Files and Batches endpoints (`--batch`)
    batch runner        the offline runner of batch input files (`--batch-file`)
    tool calls          whether the server takes `tools` natively (else emulated by structured output)

Defaults here are those of a generic OpenAI-compatible server: `json_schema` with a name and the
schema, `max_tokens`, sampling parameters taken whatever the model, no tokenize route, requests
served concurrently, no engine, no Batch API, no batch runner."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from memaudit.llm.tools import EMULATED, NATIVE


@dataclass(frozen=True)
class TokenizeRoute:
    """A server's tokenize endpoint: its path beside /v1 and the body it takes for a text; every
    such server answers {"tokens": [...]}."""
    path: str
    body: Callable[[str], dict]


# The tokenize routes servers are known to have, here with the base: a dialect lists those of its
# kind of server, and a server of unknown kind (`openai`) may have any of them.
LLAMA_CPP_TOKENIZE = TokenizeRoute("/tokenize", lambda text: {"content": text})  # llama.cpp's server
LLAMA_CPP_PYTHON_TOKENIZE = TokenizeRoute("/extras/tokenize", lambda text: {"input": text})  # llama-cpp-python's
# vLLM's `POST /tokenize` with {"prompt"}; without the BOS token, as llama.cpp counts.
VLLM_TOKENIZE = TokenizeRoute("/tokenize", lambda text: {"prompt": text, "add_special_tokens": False})


class Dialect:
    name: str = ""
    # Where the server counts tokens, tried in turn (memaudit/llm/tokens.py); none: the model's
    # tokenizer on this machine counts, else the server's context-length error decides.
    tokenize_routes: tuple[TokenizeRoute, ...] = ()
    # The server answers one request at a time: a server memaudit starts of this kind (the embedded
    # model) is sent one request at a time, so the others wait on memaudit's side, clear of HTTP read
    # timeouts. A server you run yourself gets up to --concurrency requests (it may have parallel slots).
    serial: bool = False
    # The server takes OpenAI's Files and Batches endpoints (`--batch` uploads there).
    batch_api: bool = False
    # The offline runner of batch input files (`--batch-file`), as a command line with {input},
    # {output} and {model}; None: this kind of server has none.
    batch_runner: str | None = None
    # Whether the server takes `tools` in a chat request natively; where it does not, tool calls
    # are emulated by structured output (the recording proxy, memaudit/llm/proxy.py; llm/tools.py).
    native_tools: bool = False

    @property
    def tool_calls(self) -> str:
        """How a request offering tools is answered on this kind of server: native | emulated."""
        return NATIVE if self.native_tools else EMULATED

    def is_reasoning_model(self, model: str) -> bool:
        """A reasoning model is given the reasoning budget (dialects/__init__.py `sent_fields`)."""
        return False

    def max_tokens_field(self, refused: frozenset[str]) -> str:
        return "max_completion_tokens" if "max_tokens" in refused else "max_tokens"

    def response_format(self, schema: dict, name: str) -> dict:
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}

    def engine_command(self, *, port: int, threads: int, model_path: Path | None, model: str | None) -> list[str] | None:
        """The command that serves a model of this kind on loopback port `port` (`memaudit serve
        --engine`); None: memaudit cannot start such a server."""
        return None

    def request_body(self, *, model: str, messages: list[dict], temperature: float | None, top_p: float | None,
                     max_tokens: int | None, seed: int, schema: dict | None, schema_name: str,
                     reasoning_effort: str | None = None, refused: frozenset[str] = frozenset(),
                     tools: dict | None = None, params: dict | None = None) -> dict:
        """The chat-completions body in this dialect; a None field is left out. `tools`: a request's
        tool fields, sent as the library sent them (native tool calls: memaudit/llm/tools.py);
        `params`: its other sampling parameters, also as sent (dialects/__init__.py FORWARDED)."""
        body: dict = {"model": model, "messages": messages, "seed": seed}
        if temperature is not None:
            body["temperature"] = temperature
        if top_p is not None:
            body["top_p"] = top_p
        if max_tokens is not None:
            body[self.max_tokens_field(refused)] = max_tokens
        if reasoning_effort is not None:
            body["reasoning_effort"] = reasoning_effort
        if schema is not None:
            body["response_format"] = self.response_format(schema, re.sub(r"[^A-Za-z0-9_-]", "_", schema_name)[:64])
        return {**body, **(tools or {}), **(params or {})}
