"""Endpoints and the one retry loop (what a request body holds: memaudit/llm/dialect.py).

One shared httpx client per endpoint; each endpoint bounds its in-flight calls with a capacity
limiter; a role listing several base URLs spreads calls by least in-flight load."""
from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass, field

import anyio
import httpx

from memaudit.errors import ContextOverflow, EndpointError
from memaudit.llm.dialect import refusal

RETRYABLE = {408, 409, 425, 429}
OVERFLOW_PATTERN = re.compile(
    r"context[ _-]?length|context window|maximum context|too many tokens|prompt is too long|"
    r"exceed(s|ed)? (the )?(context|max)|context_length_exceeded|n_ctx", re.I)


@dataclass
class Endpoint:
    base_url: str
    client: httpx.AsyncClient
    limiter: anyio.CapacityLimiter
    in_flight: int = 0


@dataclass
class Transport:
    """Owns the endpoints and the retry policy. Transport knobs never reach a cache key."""
    concurrency: int
    max_retries: int = 6
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    timeout: float = 600.0
    mock: httpx.AsyncBaseTransport | None = None
    _endpoints: dict = field(default_factory=dict)
    retries: int = 0
    serial_urls: set = field(default_factory=set)  # one-request-at-a-time servers (the embedded model)
    # Servers memaudit started itself: base URL -> an async check that raises when the server's
    # process has exited, so a crash is reported at once, not after every retry (llm/server.py).
    watched: dict = field(default_factory=dict)

    def endpoint(self, base_url: str, api_key: str | None) -> Endpoint:
        ident = (base_url, api_key)
        if ident not in self._endpoints:
            headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
            client = httpx.AsyncClient(
                base_url=base_url, headers=headers, transport=self.mock,
                timeout=httpx.Timeout(self.timeout, connect=10.0),
                limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency))
            limit = 1 if base_url in self.serial_urls else self.concurrency
            self._endpoints[ident] = Endpoint(base_url, client, anyio.CapacityLimiter(limit))
        return self._endpoints[ident]

    async def aclose(self) -> None:
        for ep in self._endpoints.values():
            await ep.client.aclose()
        self._endpoints.clear()

    def pick(self, base_urls: tuple[str, ...], api_key: str | None) -> Endpoint:
        endpoints = [self.endpoint(u, api_key) for u in base_urls]
        return min(endpoints, key=lambda e: e.in_flight)

    async def post_chat(self, base_urls: tuple[str, ...], api_key: str | None, body: dict,
                        role: str) -> tuple[dict, float]:
        """POST /chat/completions with retries. Returns (response JSON, latency seconds)."""
        if not base_urls:
            raise EndpointError(f"no endpoint configured for role {role}")
        last = ""
        for attempt in range(self.max_retries + 1):
            ep = self.pick(base_urls, api_key)
            wait: float | None = None
            ep.in_flight += 1
            try:
                async with ep.limiter:
                    start = time.perf_counter()
                    resp = await ep.client.post("/chat/completions", json=body)
                    latency = time.perf_counter() - start
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                if ep.base_url in self.watched:
                    await self.watched[ep.base_url]()
                last = f"{type(exc).__name__}: {exc}".strip()
            else:
                if resp.status_code == 200:
                    try:
                        return resp.json(), latency
                    except ValueError:
                        last = "response body is not JSON"
                else:
                    message = _server_message(resp)
                    if OVERFLOW_PATTERN.search(message) and resp.status_code in (400, 413, 422, 500):
                        raise ContextOverflow(role, None, None, message[:200])
                    if resp.status_code not in RETRYABLE and resp.status_code < 500:
                        raise refusal(resp, message, ep.base_url)
                    last = f"HTTP {resp.status_code}: {message[:200]}"
                    wait = _retry_after(resp)
            finally:
                ep.in_flight -= 1
            if attempt == self.max_retries:
                break
            self.retries += 1
            backoff = self.backoff_base * (2 ** attempt) * (0.5 + random.random())
            await anyio.sleep(min(self.backoff_cap, wait if wait is not None else backoff))
        raise EndpointError(f"gave up after {self.max_retries + 1} attempts for role {role}: {last}",
                            url=base_urls[0])


def _server_message(resp: httpx.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.text or resp.reason_phrase
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, dict):
        return str(err.get("message") or err.get("detail") or err)
    return str(err)


def _retry_after(resp: httpx.Response) -> float | None:
    ms = resp.headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    seconds = resp.headers.get("retry-after")
    if seconds:
        try:
            return float(seconds)
        except ValueError:
            return None
    return None
