"""llama.cpp's server and llama-cpp-python's (the embedded model): structured output as
`json_object` with the schema beside it (the OpenAI `json_schema` type is rejected), `max_tokens`.
A model served by llama.cpp takes the sampling parameters whatever it is called."""
from __future__ import annotations

from pathlib import Path

from memaudit.llm.dialects.base import LLAMA_CPP_PYTHON_TOKENIZE, LLAMA_CPP_TOKENIZE, Dialect


class LlamaCpp(Dialect):
    name = "llamacpp"
    tokenize_routes = (LLAMA_CPP_TOKENIZE, LLAMA_CPP_PYTHON_TOKENIZE)
    # llama-cpp-python's server answers one request at a time (a global lock).
    serial = True
    # Tool calls need a function-calling chat format (llama-cpp-python) or --jinja (llama.cpp).
    native_tools = False

    def response_format(self, schema: dict, name: str) -> dict:
        return {"type": "json_object", "schema": schema}

    def engine_command(self, *, port: int, threads: int, model_path: Path | None, model: str | None) -> list[str]:
        """llama-cpp-python's server with the bundled model (or `model_path`)."""
        from memaudit.llm.server import server_command  # here: few commands start the server
        return server_command(port, threads=threads, model_path=model_path)
