"""vLLM's OpenAI-compatible server: the base's structured output (`json_schema` with a name and a
schema; the old `guided_json` fields are silently ignored by current vLLM) and `max_tokens`. A model
served by vLLM takes the sampling parameters whatever it is called."""
from __future__ import annotations

import shutil
from pathlib import Path

from memaudit.errors import BadInput
from memaudit.llm.dialects.base import VLLM_TOKENIZE, Dialect


class VLLM(Dialect):
    name = "vllm"
    tokenize_routes = (VLLM_TOKENIZE,)
    batch_runner = "vllm run-batch -i {input} -o {output} --model {model}"
    # Tool calls need a server started with --enable-auto-tool-choice and a --tool-call-parser.
    native_tools = False

    def engine_command(self, *, port: int, threads: int, model_path: Path | None, model: str | None) -> list[str]:
        """A hand-over to `vllm serve` where vLLM is installed (a GPU machine)."""
        if not model:
            raise BadInput("--engine vllm needs --model NAME (the model vLLM should load)", field="model")
        vllm = shutil.which("vllm")
        if vllm is None:
            raise BadInput("vLLM is not installed here (it needs a GPU machine: pip install 'memaudit-bench[vllm]'); "
                           "use --engine llamacpp for the embedded model", field="engine")
        return [vllm, "serve", model, "--host", "127.0.0.1", "--port", str(port), "--served-model-name", model]
