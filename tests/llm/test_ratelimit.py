"""One rate budget per endpoint (`--rpm`/`--tpm`, memaudit/llm/ratelimit.py): requests paced evenly,
tokens charged by estimate and settled by usage, the budget shared out across shards, a section's
budget for its own endpoint, a 429's retry-after still waited out on top. Time is a test clock here:
no assertion on the wall clock."""
from __future__ import annotations

from dataclasses import replace

import anyio
import pytest

from memaudit.config import load_settings
from memaudit.errors import BadInput
from memaudit.llm.client import LLM
from memaudit.llm.ratelimit import SECONDS, Budget, Pacer, RateBudgets
from memaudit.runtime import open_runtime
from memaudit.shards import Shard
from memaudit.store import open_store
from memaudit.testing.fake_openai import FakeOpenAI
from tests.conftest import FAKE_URL
from tests.llm.test_client import MESSAGES, SCHEMA


class Clock:
    """Test time: `sleep` records the wait and, when `advances`, moves the clock by it."""

    def __init__(self, advances: bool = True):
        self.now = 0.0
        self.advances = advances
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(round(seconds, 6))
        if self.advances:
            self.now += seconds
        await anyio.lowlevel.checkpoint()


def test_requests_are_spaced_evenly_and_tokens_settled_by_usage():
    async def main():
        clock = Clock()
        pacer = Pacer(Budget(rpm=60, tpm=600), clock, clock.sleep)
        minute = SECONDS / 60  # a minute as paced (with its margin for the trip to the server)
        first = await pacer.turn(100)  # at 0; the next request no earlier than 1 s, the next tokens 10 s
        await pacer.turn(10)           # waits for the tokens: 10 s
        assert clock.waits == pytest.approx([10 * minute])
        first.settle(50)  # 50 of the 100 charged: 5 s back
        await pacer.turn(10)           # the tokens allow it at once (6 s); the request spacing: 1 s
        assert clock.waits == pytest.approx([10 * minute, 1 * minute]) and clock.now == pytest.approx(11 * minute)
    anyio.run(main)


def test_no_minute_holds_more_than_rpm_requests():
    async def main():
        clock = Clock()
        pacer = Pacer(Budget(rpm=600), clock, clock.sleep)
        sent = []
        for _ in range(2000):
            await pacer.turn(0)
            sent.append(clock.now)
        return sent

    sent = anyio.run(main)
    most = max(sum(1 for t in sent if start <= t < start + 60) for start in sent)
    assert 595 <= most <= 600


def run_calls(settings, n: int, clock: Clock, fake: FakeOpenAI | None = None):
    """`n` concurrent calls (distinct requests) through a client whose pacers run on `clock`."""
    fake = fake or FakeOpenAI()

    async def main():
        async with open_store(settings.db) as store:
            llm = LLM(settings, store.calls, transport=fake.transport())
            llm.transport.rates.clock, llm.transport.rates.sleep = clock, clock.sleep
            try:
                async with anyio.create_task_group() as tg:
                    for i in range(n):
                        tg.start_soon(lambda i=i: llm.call("agent", MESSAGES, schema=SCHEMA, seed_parts=(i,)))
            finally:
                await llm.aclose()
    anyio.run(main)
    return fake


def test_the_client_paces_concurrent_calls_at_the_endpoints_rpm(settings):
    clock = Clock(advances=False)  # every call asks at 0: the waits are the turns they were given
    fake = run_calls(replace(settings, rpm=60), 5, clock)
    assert sorted(clock.waits) == pytest.approx([SECONDS / 60 * i for i in (1, 2, 3, 4)]) and len(fake.requests) == 5


def test_a_shard_takes_its_share_of_the_budget(settings):
    async def budget(shard):
        async with open_runtime(replace(settings, rpm=600, tpm=90_000), transport=FakeOpenAI().transport(),
                                shard=shard) as rt:
            return rt.llm.transport.rates.pacer(FAKE_URL).budget

    assert anyio.run(budget, None) == Budget(600, 90_000)
    assert anyio.run(budget, Shard(2, 3)) == Budget(200, 30_000)


def test_a_retry_after_is_waited_out_on_top_of_the_budget(settings, monkeypatch):
    clock = Clock()
    backoffs = []

    async def backoff(seconds):  # the transport's wait before a retry, on the same test clock
        backoffs.append(seconds)
        clock.now += seconds
    monkeypatch.setattr(anyio, "sleep", backoff)
    fake = FakeOpenAI(retry_after="5")
    fake.faults = [429]
    run_calls(replace(settings, rpm=60, backoff_cap=30.0), 1, clock, fake)
    # the budget would let the retry go at 1 s; the server asked for 5 s, and got them
    assert backoffs == [5.0] and clock.waits == [] and len(fake.requests) == 2


def test_budgets_per_endpoint_from_flag_environment_and_config(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('rpm = 900\n[roles.slot_fill]\nbase_url = "http://judge.test/v1"\nrpm = 100\ntpm = 5000\n'
                      '[roles.recovery_judge]\nbase_url = "http://judge.test/v1"\nrpm = 50\n'
                      '[judges.judge-b]\nbase_url = "http://other.test/v1"\ntpm = 7000\n')
    settings = load_settings(base_url=FAKE_URL, model="m", config=config, env={})
    assert settings.rate_limits() == {None: (900, None), "http://judge.test/v1": (50, 5000),
                                      "http://other.test/v1": (900, 7000)}
    assert load_settings(base_url=FAKE_URL, model="m", env={"MEMAUDIT_RPM": "30"}).rpm == 30
    assert load_settings(base_url=FAKE_URL, model="m", rpm=20, env={"MEMAUDIT_RPM": "30"}).rpm == 20
    shared = replace(settings, rate_share=4).rate_limits()
    assert shared["http://judge.test/v1"] == (12.5, 1250) and shared[None] == (225, None)


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "many"])
def test_a_bad_budget_is_refused_naming_it(value):
    with pytest.raises(BadInput, match="MEMAUDIT_TPM: expected a number from 1 to"):
        load_settings(base_url=FAKE_URL, model="m", env={"MEMAUDIT_TPM": value})


def test_a_bad_budget_in_the_config_names_file_and_key(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[roles.agent]\nrpm = 0\n')
    with pytest.raises(BadInput) as refused:
        load_settings(base_url=FAKE_URL, model="m", config=config, env={})
    assert str(config) in str(refused.value) and "roles.agent.rpm" in str(refused.value)


def test_without_a_budget_nothing_is_paced(settings):
    assert RateBudgets.of(settings).pacer(FAKE_URL) is None
