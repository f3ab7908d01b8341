"""The OpenAI Files and Batches endpoints, as far as batch scoring needs them: upload an input file
(`POST /files`, multipart, purpose `batch`), create a batch (`POST /batches`, 24 h window), read a
batch (`GET /batches/{id}`), find the batch of an input file after a kill (`GET /batches`, paged)
and download an output or error file (`GET /files/{id}/content`).

Retryable answers (429, 5xx, no answer) are retried a few times with backoff; anything else is an
EndpointError naming the endpoint, with credentials scrubbed."""
from __future__ import annotations

import asyncio
import random

import anyio
import orjson

from memaudit.errors import EndpointError, redact_url
from memaudit.llm.dialects import RETRYABLE, server_message
from memaudit.llm.transport import Address

COMPLETION_WINDOW = "24h"
ATTEMPTS = 5


class BatchAPI:
    def __init__(self, base_url: str, api_key: str | None, *, timeout: float = 600.0):
        import aiohttp  # only commands that talk to a batch endpoint load it

        self.aiohttp = aiohttp
        self.address = Address.of(base_url)  # credentials in the URL, as the chat transport takes them
        self.shown = redact_url(base_url)  # the base URL as recorded and named in errors
        headers = self.address.headers({"Authorization": f"Bearer {api_key}"} if api_key else {})
        self.secrets = (api_key,) if api_key else ()
        self.session = aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=timeout))

    async def aclose(self) -> None:
        await self.session.close()

    async def __aenter__(self) -> "BatchAPI":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def upload(self, filename: str, content: bytes) -> str:
        """The id of the uploaded input file."""
        def form():
            data = self.aiohttp.FormData()
            data.add_field("purpose", "batch")
            data.add_field("file", content, filename=filename, content_type="application/jsonl")
            return data
        return (await self._json("POST", "/files", form=form))["id"]

    async def create(self, input_file_id: str, chat_path: str) -> dict:
        return await self._json("POST", "/batches", body={"input_file_id": input_file_id, "endpoint": chat_path,
                                                          "completion_window": COMPLETION_WINDOW})

    async def get(self, batch_id: str) -> dict:
        return await self._json("GET", f"/batches/{batch_id}")

    async def find(self, input_file_id: str) -> dict | None:
        """The batch made from `input_file_id`, if one was (its id was lost to a kill)."""
        after = None
        while True:
            page = await self._json("GET", "/batches", params={"limit": "100", **({"after": after} if after else {})})
            for batch in page.get("data", []):
                if batch.get("input_file_id") == input_file_id:
                    return batch
            if not page.get("has_more") or not page.get("data"):
                return None
            after = page["data"][-1]["id"]

    async def content(self, file_id: str) -> bytes:
        return await self._request("GET", f"/files/{file_id}/content")

    async def _json(self, method: str, path: str, **kwargs) -> dict:
        data = await self._request(method, path, **kwargs)
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            raise self._error(f"{method} {path}: the answer is not JSON", None) from None

    async def _request(self, method: str, path: str, *, body: dict | None = None, form=None,
                       params: dict | None = None) -> bytes:
        last = ""
        for attempt in range(ATTEMPTS):
            try:
                async with self.session.request(
                        method, self.address.to(path, params), data=form() if form else None, json=body) as resp:
                    data = await resp.read()
                    if resp.status == 200:
                        return data
                    message, _ = server_message(data)
                    if resp.status not in RETRYABLE and resp.status < 500:
                        raise self._error(f"{method} {path}: {message[:300]}", resp.status)
                    last = f"HTTP {resp.status}: {message[:200]}"
            except (self.aiohttp.ClientError, asyncio.TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if attempt < ATTEMPTS - 1:
                await anyio.sleep(min(30.0, 0.5 * 2 ** attempt * (0.5 + random.random())))
        raise self._error(f"{method} {path}: gave up after {ATTEMPTS} attempts: {last}", None)

    def _error(self, message: str, status: int | None) -> EndpointError:
        return EndpointError(message, status=status, url=self.shown, secrets=self.secrets)
