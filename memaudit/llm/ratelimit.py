"""One rate budget per endpoint: requests per minute (`--rpm`) and tokens per minute (`--tpm`).

A provider's limit is per key and endpoint, whoever sends; a study of N shards has N clients.
Each client paces its requests to an endpoint at its share of the budget (the budget over the
number of shards: Settings.rate_limits), so the N of them together stay within it without talking
to each other.

Requests are spaced evenly rather than let out in bursts (a provider enforces a per-minute limit
over shorter windows too): a request goes no earlier than 60/rpm seconds after the one before it
and, for tokens, no earlier than the one before it took of the minute (its tokens × 60/tpm). No
60-second window then holds more than `rpm` requests, nor more than `tpm` tokens besides the
request that opened the window. A request's tokens are not known before its answer: it is charged
its prompt's size in bytes over 4 plus its completion cap when sent, and the difference to the
usage the server reports is settled when the answer comes back.

Every attempt is paced, retries included; a 429's retry-after is waited out by the transport before
the retry asks for its turn here, so a server that asks for more patience gets it on top of the
budget. Transport knobs: never part of a cache key or of a run's provenance."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable, Mapping

import anyio

from memaudit.config import Settings
from memaudit.errors import BadInput

# The budget's window, a minute, paced as 60.12 s: a request's trip to the server may take up to
# 0.12 s longer than the one before it without putting one request too many into the server's minute.
SECONDS = 60.12
BYTES_PER_TOKEN = 4  # the estimate charged before the answer says how many tokens a request took


@dataclass(frozen=True)
class Budget:
    rpm: float | None = None
    tpm: float | None = None

    def __bool__(self) -> bool:
        return bool(self.rpm or self.tpm)


@dataclass
class Ticket:
    """What a request was charged when it went (settled against its usage when answered)."""
    pacer: "Pacer | None"
    tokens: int = 0

    def settle(self, used: int | None) -> None:
        """Settle against the tokens the server reported (memaudit/llm/dialects `reported_tokens`);
        None, unknown (no usage, or counts that are none): the estimate stands."""
        if self.pacer is not None and used is not None:
            self.pacer.settle(used - self.tokens)


UNPACED = Ticket(None)


@dataclass
class Pacer:
    """The pace of one endpoint (`clock` and `sleep`: anyio's, or a test's own)."""
    budget: Budget
    clock: Callable[[], float] = anyio.current_time
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    next_request: float = float("-inf")  # the earliest time the next request may go
    next_tokens: float = float("-inf")

    async def turn(self, tokens: int) -> Ticket:
        """Wait for this request's turn. The turn is taken before waiting, so requests go in the
        order they asked."""
        if self.budget.tpm and tokens > self.budget.tpm:
            # Paced, it would wait minutes without a word; a provider refuses it for good (429s).
            raise BadInput(f"one request of ~{tokens:,} tokens is more than the {self.budget.tpm:,.0f} tokens a minute "
                           "this process may send to its endpoint (--tpm, shared out over the shards): it can never "
                           "be sent within the budget; raise --tpm", field="tpm")
        now = self.clock()
        start = max(now, self.next_request, self.next_tokens)
        if self.budget.rpm:
            self.next_request = start + SECONDS / self.budget.rpm
        if self.budget.tpm:
            self.next_tokens = start + tokens * SECONDS / self.budget.tpm
        if start > now:
            await self.sleep(start - now)
        return Ticket(self, tokens)

    def settle(self, tokens: int) -> None:
        """Charge (or give back) the difference between a request's estimate and its usage."""
        if self.budget.tpm:
            self.next_tokens += tokens * SECONDS / self.budget.tpm


@dataclass
class RateBudgets:
    """The pacers of a command's endpoints: `limits` maps a base URL to its budget (None: the budget
    of every other endpoint)."""
    limits: Mapping[str | None, Budget] = field(default_factory=dict)
    pacers: dict[str, Pacer | None] = field(default_factory=dict)
    clock: Callable[[], float] = anyio.current_time
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep

    @classmethod
    def of(cls, settings: Settings) -> "RateBudgets":
        return cls({url: Budget(*pair) for url, pair in settings.rate_limits().items()})

    def pacer(self, base_url: str) -> Pacer | None:
        if base_url not in self.pacers:
            budget = self.limits.get(base_url) or self.limits.get(None) or Budget()
            self.pacers[base_url] = Pacer(budget, self.clock, self.sleep) if budget else None
        return self.pacers[base_url]

    async def turn(self, base_url: str, content: bytes, body: Mapping) -> Ticket:
        """Wait for the turn of a request of `content` (its JSON body, `body` parsed) to `base_url`."""
        pacer = self.pacer(base_url)
        if pacer is None:
            return UNPACED
        cap = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        return await pacer.turn(len(content) // BYTES_PER_TOKEN + int(cap))
