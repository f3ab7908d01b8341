"""Endpoints and the one retry loop (what a request body holds and what an answer means: memaudit/llm/dialects/).
Chat completions (the model client) and embeddings (llm/embed.py) both go through it.

One HTTP session per endpoint (aiohttp; its connection pool keeps the client's CPU per call flat
from 1 to 512 calls in flight, where httpx's grows with the number of connections: see
perf/http_clients.py). Each endpoint bounds its in-flight calls with a capacity
limiter of `--concurrency`, and its pool keeps as many connections alive; a role listing several
base URLs (a fleet) spreads calls by least in-flight load. An `httpx.MockTransport` stands in for
the network in unit tests (`FakeOpenAI.transport()`).

Failures are sorted here: retryable statuses and unreachable servers are retried; a context
length error is `ContextOverflow` and a content refusal is `Refusal` (outcomes of the request);
a 400 naming a parameter the model does not take is `ParameterRefused` (the client asks again
without it: llm/dialects/); any other refusal (401/403/404, an unknown model, another rejected
parameter) is `EndpointError`, a misconfigured endpoint that ends the command and is never
recorded. A server memaudit started itself is checked when it stops answering (`watched`), so
its death is reported at once."""
from __future__ import annotations

import asyncio
import base64
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Protocol

import anyio
import orjson
from yarl import URL

from memaudit.errors import EndpointError, redact_url
from memaudit.llm.dialects import RETRYABLE, answer_error, reported_tokens, server_message
from memaudit.llm.ratelimit import RateBudgets
from memaudit.llm.secrets import Secrets

JSON_HEADERS = {"content-type": "application/json"}


if TYPE_CHECKING:  # httpx is needed only where a test hands in its MockTransport
    import httpx


class Unreachable(Exception):
    """The request got no HTTP answer (refused, reset, timed out): retried."""


class Session(Protocol):
    """POSTs JSON bytes to one endpoint: (status, headers, body bytes), or raises Unreachable."""

    async def post(self, path: str, content: bytes) -> tuple[int, Mapping[str, str], bytes]: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Address:
    """Where the requests to a configured base URL go. `http://user:key@host/v1` means basic auth,
    unless a bearer token is configured too (it wins); `…/v1?api-key=K` (how some hosts take a key)
    means every request carries that query. Either way the credentials leave the URL, which error
    messages may then name: a route is joined to the path, the query put back after it."""
    url: str  # scheme://host[:port]/path: no userinfo, no query, no trailing slash
    query: tuple[tuple[str, str], ...]
    basic: str | None  # the Authorization value of `user:key@`

    @classmethod
    def of(cls, base_url: str) -> "Address":
        url = URL(base_url)
        basic = None
        if url.user is not None:
            basic = "Basic " + base64.b64encode(f"{url.user}:{url.password or ''}".encode()).decode()
        bare = url.with_user(None).with_query(None).with_fragment(None)
        return cls(str(bare).rstrip("/"), tuple(url.query.items()), basic)

    def to(self, path: str, params: Mapping[str, str] | None = None) -> URL:
        """The URL of a route (`/chat/completions`) below the base URL, with the base URL's query
        and `params` of this request."""
        return URL(self.url + path).with_query([*self.query, *(params or {}).items()])

    def headers(self, headers: dict) -> dict:
        return headers if self.basic is None or "Authorization" in headers else {**headers, "Authorization": self.basic}


class AiohttpSession:
    def __init__(self, base_url: str, headers: dict, connections: int, timeout: float):
        import aiohttp  # here: commands that call no model (tables, view, export) never load it
        self.errors = (aiohttp.ClientError, asyncio.TimeoutError)
        self.address = Address.of(base_url)
        # As many connections are kept alive as may be in flight: none is reopened between calls.
        self.client = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connections, limit_per_host=connections, keepalive_timeout=60),
            timeout=aiohttp.ClientTimeout(total=timeout, connect=10.0),
            headers={**self.address.headers(headers), **JSON_HEADERS})

    async def post(self, path: str, content: bytes) -> tuple[int, Mapping[str, str], bytes]:
        try:
            async with self.client.post(self.address.to(path), data=content) as resp:
                return resp.status, resp.headers, await resp.read()
        except self.errors as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}".strip().rstrip(":")) from None

    async def aclose(self) -> None:
        await self.client.close()


class MockSession:
    """The same calls through an httpx transport that never opens a socket (the unit tests' double)."""

    def __init__(self, base_url: str, headers: dict, mock: httpx.AsyncBaseTransport):
        self.address = Address.of(base_url)
        self.headers = {**self.address.headers(headers), **JSON_HEADERS}
        self.mock = mock

    async def post(self, path: str, content: bytes) -> tuple[int, Mapping[str, str], bytes]:
        import httpx
        request = httpx.Request("POST", str(self.address.to(path)), headers=self.headers, content=content)
        try:
            resp = await self.mock.handle_async_request(request)
            return resp.status_code, resp.headers, await resp.aread()
        except httpx.TransportError as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}".strip().rstrip(":")) from None

    async def aclose(self) -> None:
        return None


@dataclass
class Endpoint:
    base_url: str
    session: Session
    limiter: anyio.CapacityLimiter
    in_flight: int = 0  # waiting for the limiter or on the wire: what least-load spreading compares


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
    serial_urls: set = field(default_factory=set)  # servers sent one request at a time (dialects: `serial`)
    # Servers memaudit started itself: base URL -> an async check that raises when the server's
    # process has exited, so a crash is reported at once, not after every retry (llm/server.py).
    watched: dict = field(default_factory=dict)
    # Requests and tokens per minute per endpoint (`--rpm`/`--tpm`): memaudit/llm/ratelimit.py.
    rates: RateBudgets = field(default_factory=RateBudgets)
    # Every configured secret, removed from each answer and error body before anything reads it
    # (memaudit/llm/secrets.py): a server that echoes the key gets it stored nowhere.
    secrets: Secrets = field(default_factory=Secrets)

    def endpoint(self, base_url: str, api_key: str | None) -> Endpoint:
        ident = (base_url, api_key)
        if ident not in self._endpoints:
            headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
            limit = 1 if base_url in self.serial_urls else self.concurrency
            session = (MockSession(base_url, headers, self.mock) if self.mock is not None
                       else AiohttpSession(base_url, headers, limit, self.timeout))
            self._endpoints[ident] = Endpoint(base_url, session, anyio.CapacityLimiter(limit))
        return self._endpoints[ident]

    async def aclose(self) -> None:
        for ep in self._endpoints.values():
            await ep.session.aclose()
        self._endpoints.clear()

    def pick(self, base_urls: tuple[str, ...], api_key: str | None) -> Endpoint:
        if len(base_urls) == 1:
            return self.endpoint(base_urls[0], api_key)
        return min((self.endpoint(u, api_key) for u in base_urls), key=lambda e: e.in_flight)

    async def post(self, path: str, base_urls: tuple[str, ...], api_key: str | None, body: dict,
                   role: str) -> tuple[dict, float]:
        """POST `body` to `path` below the base URL (a chat completion, or embeddings) with retries.
        Returns (response JSON, latency seconds)."""
        if not base_urls:
            raise EndpointError(f"no endpoint configured for role {role}")
        secrets = (*((api_key,) if api_key else ()), *self.secrets.values)
        content = orjson.dumps(body)
        last = ""
        for attempt in range(self.max_retries + 1):
            ep = self.pick(base_urls, api_key)
            wait: float | None = None
            ep.in_flight += 1
            try:
                async with ep.limiter:
                    ticket = await self.rates.turn(ep.base_url, content, body)
                    start = time.perf_counter()
                    status, headers, data = await ep.session.post(path, content)
                    latency = time.perf_counter() - start
                    data = data if status == 200 else self.secrets.body(data)
            except Unreachable as exc:
                if ep.base_url in self.watched:
                    await self.watched[ep.base_url]()
                last = str(exc)
            else:
                if status == 200:
                    try:
                        answer = self.secrets.answer(orjson.loads(data))
                    except orjson.JSONDecodeError:
                        last = "response body is not JSON"
                    else:
                        ticket.settle(reported_tokens(answer.get("usage")) if isinstance(answer, dict) else None)
                        return answer, latency
                else:
                    error = answer_error(status, data, role, ep.base_url, secrets)
                    if error is not None:
                        raise error
                    last = f"HTTP {status}: {server_message(data)[0][:200]}"
                    wait = _retry_after(headers)
            finally:
                ep.in_flight -= 1
            if attempt == self.max_retries:
                break
            self.retries += 1
            backoff = self.backoff_base * (2 ** attempt) * (0.5 + random.random())
            await anyio.sleep(min(self.backoff_cap, wait if wait is not None else backoff))
        where = ", ".join(redact_url(u) for u in base_urls)
        raise EndpointError(f"unreachable: gave up after {self.max_retries + 1} attempts for role {role} "
                            f"({where}): {last}", secrets=secrets)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    seconds = headers.get("retry-after")
    if seconds:
        try:
            return float(seconds)
        except ValueError:
            return None
    return None
