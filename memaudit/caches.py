"""What the model client and the embedder need from a cache: two narrow protocols. The store's
`calls` and `vectors` repositories implement them; the client and the embedder never see the
store itself."""
from __future__ import annotations

from typing import Any, Protocol


class CallCache(Protocol):
    async def get_call(self, key: str) -> Any:
        """The recorded call row (mapping with `response` and `ok`) for `key`, or None."""

    def put_call(self, *, key: str, role: str, model: str, request: str, response: str, ok: bool,
                 prompt_tokens: int = 0, completion_tokens: int = 0, cached_tokens: int = 0,
                 latency: float = 0.0, created: str = "", reasoning_tokens: int = 0) -> None:
        """Record a call (committed with the next write; readable by get_call at once)."""

    async def maybe_flush(self) -> None:
        """Commit queued rows when enough have piled up or the oldest has waited long enough."""

    async def refused_params(self) -> list[tuple[str, str, str]]:
        """(model, backend, param) of every request parameter a model refused."""

    async def record_refusal(self, model: str, backend: str, param: str) -> None:
        """Remember at once that `model` on `backend` refuses `param`."""


class VectorCache(Protocol):
    async def get_vectors(self, model: str, hashes: list[str]) -> dict[str, bytes]:
        """Stored vectors of the text hashes that have one."""

    def put_vectors(self, model: str, vectors: dict[str, bytes]) -> None:
        """Record vectors (committed with the next write)."""
