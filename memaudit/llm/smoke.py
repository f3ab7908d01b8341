"""`memaudit serve --smoke`: start the embedded server, ask the bundled model one short question in
the llama.cpp dialect, stop it. Here, not in llm/server.py: the dialects start the server
(`engine_command`), so the server must not build requests in a dialect."""
from __future__ import annotations

from pathlib import Path

import httpx

from memaudit.config import EMBEDDED_MODEL
from memaudit.errors import EndpointError
from memaudit.llm.dialects import request_body
from memaudit.llm.server import embedded_server

SMOKE_TIMEOUT = 120.0


async def smoke_check(log_path: Path, *, threads: int = 2) -> str:
    """Start the embedded server, ask the bundled model one short question, stop it; returns the
    answer. Raises EndpointError (naming the log) when the model does not load or answer."""
    async with embedded_server(threads=threads, log_path=log_path) as server:
        body = request_body(backend="llamacpp", model=EMBEDDED_MODEL, seed=0, temperature=0.0, top_p=None,
                            max_tokens=8, schema=None, schema_name="smoke",
                            messages=[{"role": "user", "content": "Say hello in one word."}])
        async with httpx.AsyncClient(base_url=server.url, timeout=SMOKE_TIMEOUT) as client:
            try:
                resp = await client.post("/chat/completions", json=body)
            except httpx.HTTPError as exc:
                await server.check_alive()
                raise EndpointError(f"the completion failed ({type(exc).__name__}: {exc}); log: {log_path}") from None
        try:
            answer = resp.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            answer = ""
        if resp.status_code != 200 or not answer.strip():
            raise EndpointError(f"the bundled model gave no answer (HTTP {resp.status_code}: {resp.text[:120]!r}); "
                                f"log: {log_path}")
        return answer.strip()
