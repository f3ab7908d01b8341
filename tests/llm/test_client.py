"""The model client through the fake OpenAI server: retries, repair, overflow, dialects, cache
modes, single-flight, cache keys, endpoint spreading, fault tolerance, endpoint misconfiguration
and credentials; most through `FakeOpenAI.transport()`, a few over real loopback HTTP."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import replace

import anyio
import httpx
import orjson
import pytest

from memaudit.config import EMBEDDED_MODEL, EMBEDDED_REPAIR_ATTEMPTS, REPO_ROOT, load_settings
from memaudit.errors import CacheMiss, ContextOverflow, EndpointError, InvalidOutput, Refusal, scrub
from memaudit.llm.keys import TEXT_HASH_SCHEME, text_hash
from memaudit.llm.client import LLM
from memaudit.store import open_store
from memaudit.testing.fake_openai import FakeOpenAI, completion
from memaudit.testing.http_server import serve, stats_url

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
          "additionalProperties": False}
MESSAGES = [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "What is 2+2?"}]


def run_with_llm(settings, transport, fn):
    """Open a store, build a client on `transport`, run `await fn(llm)` and return its value."""
    async def main():
        async with open_store(settings.db) as store:
            llm = LLM(settings, store.calls, transport=transport)
            try:
                return await fn(llm)
            finally:
                await llm.aclose()
    return anyio.run(main)


def call(llm, **kw):
    kw.setdefault("schema", SCHEMA)
    return llm.call("agent", kw.pop("messages", MESSAGES), **kw)


# -- retries -----------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", [408, 429, 500, 502, 503, 504, "timeout"])
def test_retryable_faults_are_retried(settings, fake, fault):
    fake.faults = [fault, fault]
    result = run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    assert orjson.loads(result.text) == result.data
    assert len(fake.requests) == 3


def test_connection_errors_are_retried(settings, fake):
    failures = [httpx.ConnectError("refused"), httpx.RemoteProtocolError("dropped")]

    async def handle(request):
        if failures:
            raise failures.pop(0)
        return await fake.handle(request)

    result = run_with_llm(settings, httpx.MockTransport(handle), lambda llm: call(llm))
    assert result.data is not None and not failures


def test_retries_give_up_after_the_budget(settings, fake):
    settings = replace(settings, max_retries=2)
    fake.faults = [503] * 5
    with pytest.raises(EndpointError, match="gave up after 3 attempts"):
        run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    assert len(fake.requests) == 3


@pytest.fixture
def backoffs(monkeypatch):
    """The waits the retry loop asks for, recorded instead of slept (no wall-clock assertion)."""
    waits: list[float] = []
    real_sleep = anyio.sleep

    async def record(seconds):
        waits.append(seconds)
        await real_sleep(0)
    monkeypatch.setattr(anyio, "sleep", record)
    return waits


def test_retry_after_is_honoured_up_to_the_cap(settings, backoffs):
    fake = FakeOpenAI(retry_after="0.2")
    fake.faults = [429]
    run_with_llm(replace(settings, backoff_cap=1.0), fake.transport(), lambda llm: call(llm))
    assert backoffs == [0.2]

    capped = FakeOpenAI(retry_after="3600")
    capped.faults = [429]
    run_with_llm(replace(settings, backoff_cap=0.1), capped.transport(), lambda llm: call(llm, seed_parts=(1,)))
    assert backoffs == [0.2, 0.1]


def test_retry_after_ms_is_honoured(settings, fake, backoffs):
    sent = []

    async def handle(request):
        sent.append(request)
        if len(sent) == 1:
            return httpx.Response(429, json={"error": {"message": "slow down"}}, headers={"retry-after-ms": "250"})
        return await fake.handle(request)

    run_with_llm(replace(settings, backoff_cap=5.0), httpx.MockTransport(handle), lambda llm: call(llm))
    assert len(sent) == 2 and backoffs == [0.25]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_fail_at_once_with_the_server_message(settings, fake, status):
    async def handle(request):
        fake.requests.append(request)
        return httpx.Response(status, json={"error": {"message": f"the server says no ({status})"}})

    with pytest.raises(EndpointError, match=rf"the server says no \({status}\)") as info:
        run_with_llm(settings, httpx.MockTransport(handle), lambda llm: call(llm))
    assert info.value.status == status
    assert len(fake.requests) == 1
    assert str(info.value).count("error") == 1  # one prefix, not "endpoint error: endpoint … error"


# -- context overflow --------------------------------------------------------------------------
def test_server_context_length_error_is_overflow(settings, fake):
    fake.faults = ["overflow"]
    with pytest.raises(ContextOverflow, match="role agent"):
        run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    assert len(fake.requests) == 1


@pytest.mark.parametrize("server", [True, "vllm"])  # llama.cpp's /tokenize body, and vLLM's
def test_overflow_is_counted_by_the_server_before_the_call(settings, fake, server):
    fake.tokenize = server
    settings = replace(settings, context_window=50)
    long = [{"role": "user", "content": "word " * 200}]
    with pytest.raises(ContextOverflow, match="counted by the server's /tokenize before the call"):
        run_with_llm(settings, fake.transport(), lambda llm: call(llm, messages=long))
    assert fake.requests == []


def test_without_a_server_count_the_call_is_made_and_its_context_error_decides(settings, fake):
    settings = replace(settings, context_window=50)
    fake.tokenize = False
    fake.faults = ["overflow"]
    long = [{"role": "user", "content": "word " * 200}]
    with pytest.raises(ContextOverflow):
        run_with_llm(settings, fake.transport(), lambda llm: call(llm, messages=long))
    assert len(fake.requests) == 1


# -- structured output and repair --------------------------------------------------------------
def test_garbage_is_repaired(settings, fake):
    fake.faults = ["garbage"]
    result = run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    assert set(result.data) == {"answer"}
    assert len(fake.requests) == 2
    repair = fake.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": "{not json"}
    assert "not valid JSON" in repair[-1]["content"]


def test_the_embedded_model_records_an_invalid_structured_answer_at_once_with_its_time(settings, fake):
    """A demo setting of the embedded model (config.EMBEDDED_REPAIR_ATTEMPTS): no repair attempt for a
    structured answer, and a failed call keeps the time its attempts took; an empty free-text reply
    is still asked again, and any other model keeps its repairs."""
    embedded = replace(settings, model=EMBEDDED_MODEL)
    slow = FakeOpenAI(latency=0.01).on("agent", lambda body: "{still not json")
    with pytest.raises(InvalidOutput):
        run_with_llm(embedded, slow.transport(), lambda llm: call(llm))
    assert len(slow.requests) == EMBEDDED_REPAIR_ATTEMPTS + 1 == 1

    async def failure_latency(llm):
        await llm.store.db.flush()
        return (await llm.store.db.fetchone("SELECT latency FROM calls WHERE ok = 0"))[0]
    assert run_with_llm(embedded, slow.transport(), failure_latency) >= 0.01

    empty_then_text = iter(["", "Here you go."])
    fake.on_text(lambda body: next(empty_then_text))
    reply = run_with_llm(replace(embedded, db=settings.db.with_name("text.db")), fake.transport(),
                         lambda llm: call(llm, schema=None))
    assert reply.text == "Here you go."
    assert len(fake.requests) == 2


def test_schema_violation_and_check_are_repaired(settings, fake):
    answers = iter([{"wrong": 1}, {"answer": "five"}, {"answer": "4"}])
    fake.on("agent", lambda body: next(answers))
    check = lambda data: None if data["answer"].isdigit() else "answer must be digits"  # noqa: E731
    result = run_with_llm(settings, fake.transport(), lambda llm: call(llm, check=check))
    assert result.data == {"answer": "4"}
    assert "answer must be digits" in fake.requests[2]["messages"][-1]["content"]


def test_always_garbage_raises_invalid_output_recorded_as_a_failure(settings, fake):
    fake.on("agent", lambda body: "{still not json")
    with pytest.raises(InvalidOutput) as info:
        run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    assert info.value.raw == "{still not json"
    assert len(fake.requests) == settings.repair_attempts + 1

    async def rows(llm):
        await llm.store.db.flush()
        return [dict(r) for r in await llm.store.db.fetchall("SELECT ok, response FROM calls")]
    recorded = run_with_llm(settings, fake.transport(), rows)
    assert [r["ok"] for r in recorded] == [0]
    assert orjson.loads(recorded[0]["response"])["raw"] == "{still not json"

    # rw meets the recorded failure again without a request (same outcome for every use of the key) ...
    before = len(fake.requests)
    with pytest.raises(InvalidOutput):
        run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    assert len(fake.requests) == before

    # ... refresh asks the model again
    with pytest.raises(InvalidOutput):
        run_with_llm(replace(settings, cache="refresh"), fake.transport(), lambda llm: call(llm))
    assert len(fake.requests) > before

    # replay meets the same failure without a request
    before = len(fake.requests)
    with pytest.raises(InvalidOutput) as again:
        run_with_llm(replace(settings, cache="replay"), fake.transport(), lambda llm: call(llm))
    assert again.value.raw == "{still not json" and len(fake.requests) == before


def test_truncated_free_text_is_kept_and_flagged_but_truncated_json_is_repaired(settings, fake):
    sent = []

    async def handle(request):
        body = orjson.loads(request.content)
        sent.append(body)
        if "response_format" in body:
            text, finish = ('{"answer": "cut', "length") if len(sent) == 2 else ('{"answer": "4"}', "stop")
        else:
            text, finish = "a reply cut at the lim", "length"
        return httpx.Response(200, json=completion(body, text, finish))

    async def both(llm):
        return await call(llm, schema=None), await call(llm)
    free, structured = run_with_llm(settings, httpx.MockTransport(handle), both)
    assert free.text == "a reply cut at the lim" and free.usage["truncated"] == 1
    assert structured.data == {"answer": "4"} and len(sent) == 3
    assert "cut off at the token limit" in sent[2]["messages"][-1]["content"]


# -- dialects ----------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["openai", "vllm", "llamacpp"])
def test_dialect_bodies(settings, fake, backend):
    settings = replace(settings, backend=backend)
    run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    rf = fake.requests[0]["response_format"]
    if backend == "openai":
        assert rf == {"type": "json_schema", "json_schema": {"name": "agent", "schema": SCHEMA, "strict": True}}
    elif backend == "vllm":
        assert rf == {"type": "json_schema", "json_schema": {"name": "agent", "schema": SCHEMA}}
    else:
        assert rf == {"type": "json_object", "schema": SCHEMA}
    assert "seed" in fake.requests[0]


# -- cache modes -------------------------------------------------------------------------------
def test_rw_serves_second_call_from_cache(settings, fake):
    async def twice(llm):
        first = await call(llm)
        second = await call(llm)
        return first, second
    first, second = run_with_llm(settings, fake.transport(), twice)
    assert not first.cached and second.cached and first.text == second.text and first.key == second.key
    assert len(fake.requests) == 1
    third = run_with_llm(settings, fake.transport(), lambda llm: call(llm))  # a new process, same store
    assert third.cached and len(fake.requests) == 1


def test_off_neither_reads_nor_writes(settings, fake):
    run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    off = replace(settings, cache="off")

    async def count(llm):
        await call(llm, seed_parts=("new",))
        await llm.store.db.flush()
        return (await llm.store.db.fetchone("SELECT COUNT(*) AS n FROM calls"))["n"]
    assert run_with_llm(off, fake.transport(), lambda llm: call(llm)).cached is False
    assert run_with_llm(off, fake.transport(), count) == 1
    assert len(fake.requests) == 3


def test_refresh_calls_again_and_overwrites(settings, fake):
    answers = iter(["first", "second"])
    fake.on("agent", lambda body: {"answer": next(answers)})
    run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    fresh = run_with_llm(replace(settings, cache="refresh"), fake.transport(), lambda llm: call(llm))
    assert fresh.data == {"answer": "second"} and not fresh.cached
    again = run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    assert again.cached and again.data == {"answer": "second"}


def test_replay_on_a_fresh_store_is_a_cache_miss(settings, fake):
    with pytest.raises(CacheMiss, match="cache miss for role agent") as info:
        run_with_llm(replace(settings, cache="replay"), fake.transport(), lambda llm: call(llm))
    assert info.value.key.startswith("s1:") and fake.requests == []


def test_replay_reproduces_recorded_answers(settings, fake):
    async def many(llm):
        return [(await call(llm, seed_parts=(i,))).text for i in range(5)]
    recorded = run_with_llm(settings, fake.transport(), many)
    gone = httpx.MockTransport(lambda request: pytest.fail("replay contacted the endpoint"))
    assert run_with_llm(replace(settings, cache="replay"), gone, many) == recorded


# -- single-flight -----------------------------------------------------------------------------
def test_identical_concurrent_calls_are_sent_once(settings):
    fake = FakeOpenAI(latency=0.05)

    async def burst(llm):
        results = []

        async def one():
            results.append(await call(llm))
        with llm.collect() as uses:
            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(one)
        return results, uses
    results, uses = run_with_llm(settings, fake.transport(), burst)
    assert len(fake.requests) == 1
    assert len({r.text for r in results}) == 1 and len(uses) == 20
    assert sum(1 for _, _, cached in uses if not cached) == 1


# -- cache keys --------------------------------------------------------------------------------
KEY_SCRIPT = """
import anyio, sys
sys.path.insert(0, {root!r})
from dataclasses import replace
from memaudit.config import load_settings
from memaudit.llm.client import LLM
from memaudit.store import open_store
from memaudit.testing.fake_openai import FakeOpenAI
SCHEMA = {schema!r}
async def main():
    s = load_settings(db={db!r}, base_url="http://other.host/v1", model="fake-model", backend="openai", env={{}})
    async with open_store(s.db) as store:
        llm = LLM(s, store.calls, transport=FakeOpenAI().transport())
        r = await llm.call("agent", {messages!r}, schema=SCHEMA, seed_parts=("u1", 3))
        print(r.key)
        await llm.aclose()
anyio.run(main)
"""


def test_cache_key_is_stable_across_processes(settings, fake, tmp_path):
    here = run_with_llm(settings, fake.transport(), lambda llm: call(llm, seed_parts=("u1", 3)))
    script = KEY_SCRIPT.format(root=str(REPO_ROOT), schema=SCHEMA, messages=MESSAGES, db=str(tmp_path / "other.db"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert out.stdout.strip() == here.key


def test_cache_key_changes_with_what_changes_the_output(settings, fake):
    async def keys(llm):
        base = (await call(llm)).key
        variants = {
            "seed": (await call(llm, seed_parts=(1,))).key,
            "temperature": (await call(llm, temperature=0.5)).key,
            "schema": (await call(llm, schema={**SCHEMA, "required": []})).key,
            "sample": (await call(llm, sample=1)).key,
            "messages": (await call(llm, messages=MESSAGES[:1] + [{"role": "user", "content": "3+3?"}])).key,
            "max_tokens": (await call(llm, max_tokens=99)).key,
        }
        return base, variants
    base, variants = run_with_llm(settings, fake.transport(), keys)
    assert base not in variants.values() and len(set(variants.values())) == len(variants)
    other_model = run_with_llm(replace(settings, model="another-model"), fake.transport(), lambda llm: call(llm))
    base_seed = run_with_llm(replace(settings, seed=7), fake.transport(), lambda llm: call(llm))
    assert other_model.key != base and base_seed.key != base


def test_cache_key_ignores_transport_knobs(settings, fake):
    base = run_with_llm(settings, fake.transport(), lambda llm: call(llm)).key
    knobs = replace(settings, api_key="sk-other", base_url="http://elsewhere.example/v1", timeout=5.0,
                    max_retries=1, backoff_base=3.0, concurrency=2, db=settings.db.with_name("knobs.db"))
    assert run_with_llm(knobs, fake.transport(), lambda llm: call(llm)).key == base


# -- endpoints ---------------------------------------------------------------------------------


def burst_over_fleet(settings, n: int) -> tuple[list[str], FakeOpenAI]:
    """The host each of `n` concurrent calls went to, and the fake (50 ms latency) behind every URL."""
    fake = FakeOpenAI(latency=0.05)
    hosts: list[str] = []

    async def handle(request):
        hosts.append(request.url.host)
        return await fake.handle(request)

    async def burst(llm):
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(lambda i=i: call(llm, seed_parts=(i,)))
    run_with_llm(settings, httpx.MockTransport(handle), burst)
    return hosts, fake


def test_calls_spread_over_several_base_urls_by_least_in_flight(tmp_path):
    config = tmp_path / "fleet.toml"
    config.write_text('[roles.agent]\nbase_url = ["http://gpu-a.test/v1", "http://gpu-b.test/v1", '
                      '"http://gpu-c.test/v1"]\nmodel = "fleet-model"\nbackend = "vllm"\n')
    settings = load_settings(db=tmp_path / "fleet.db", base_url="http://fallback.test/v1", model="m",
                             config=config, env={})
    hosts, fake = burst_over_fleet(settings, 30)
    counts = {h: hosts.count(h) for h in set(hosts)}
    assert set(counts) == {"gpu-a.test", "gpu-b.test", "gpu-c.test"}
    assert all(n == 10 for n in counts.values())
    assert all(r["model"] == "fleet-model" for r in fake.requests)


def test_thirty_percent_faults_change_no_result(settings, tmp_path):
    async def many(llm):
        out = {}

        async def one(i):
            r = await call(llm, seed_parts=(i,))
            out[i] = (r.key, r.text)
        async with anyio.create_task_group() as tg:
            for i in range(60):
                tg.start_soon(one, i)
        return out
    clean = run_with_llm(settings, FakeOpenAI().transport(), many)
    faulty_fake = FakeOpenAI(fault_rate=0.3, seed=3)
    faulty = run_with_llm(replace(settings, db=tmp_path / "faulty.db"), faulty_fake.transport(), many)
    assert faulty == clean
    assert faulty_fake.status_counts[429] + faulty_fake.status_counts[503] > 5


def test_api_key_is_never_written_to_the_store(settings, fake):
    secret = "sk-very-secret-key-4242"
    seen = []

    async def handle(request):
        seen.append(request.headers.get("authorization"))
        return await fake.handle(request)

    async def work(llm):
        await call(llm)
        fake.faults = ["garbage"] * 5
        with pytest.raises(InvalidOutput):
            await call(llm, seed_parts=("bad",))
        await llm.store.db.flush()
    run_with_llm(replace(settings, api_key=secret), httpx.MockTransport(handle), work)
    assert seen[0] == f"Bearer {secret}"
    for path in settings.db.parent.glob(settings.db.name + "*"):
        assert secret.encode() not in path.read_bytes()


def test_token_accounting_per_role(settings, fake):
    async def work(llm):
        await call(llm)
        await call(llm)  # cached: tokens counted once more as used, no new request
        await llm.call("simulator", MESSAGES, schema=None)
        return llm.stats
    stats = run_with_llm(settings, fake.transport(), work)
    assert stats["agent"].calls == 1 and stats["agent"].cache_hits == 1
    assert stats["agent"].prompt_tokens > 0 and stats["simulator"].completion_tokens > 0


def test_a_cancelled_leader_does_not_cancel_its_followers(settings):
    fake = FakeOpenAI(latency=0.1)

    async def work(llm):
        results = []

        async def leader():
            with anyio.move_on_after(0.03):
                await call(llm)

        async def follower():
            await anyio.sleep(0.01)
            results.append(await call(llm))
        async with anyio.create_task_group() as tg:
            tg.start_soon(leader)
            tg.start_soon(follower)
        return results
    results = run_with_llm(settings, fake.transport(), work)
    assert len(results) == 1 and results[0].data is not None



def test_apostrophe_escape_is_forgiven_live_and_from_the_cache(settings, fake):
    fake.on("agent", lambda body: r"""{"answer": "They\'re gone"}""")

    async def twice(llm):
        return await call(llm), await call(llm)

    first, again = run_with_llm(settings, fake.transport(), twice)
    assert first.data == again.data == {"answer": "They're gone"}
    assert again.cached and len(fake.requests) == 1


# -- endpoint misconfiguration is fatal and never recorded -------------------------------------
async def recorded_calls(llm) -> list[dict]:
    await llm.store.db.flush()
    return [dict(r) for r in await llm.store.db.fetchall("SELECT ok, response FROM calls")]


@pytest.mark.parametrize("fault", ["key", "model"])
def test_a_misconfigured_endpoint_is_not_recorded_and_works_once_fixed(settings, fake, fault):
    if fault == "key":
        fake.api_key = "sk-the-right-key-123456"
        wrong = replace(settings, api_key="sk-the-wrong-key-987654")
    else:
        fake.models = {"fake-model"}
        wrong = replace(settings, model="no-such-model")

    async def fails(llm):
        with pytest.raises(EndpointError) as info:
            await call(llm)
        return info.value, await recorded_calls(llm)
    error, rows = run_with_llm(wrong, fake.transport(), fails)
    assert error.status in (401, 404) and rows == []
    assert "sk-the-wrong-key" not in str(error)
    fixed = replace(settings, api_key="sk-the-right-key-123456") if fault == "key" else settings
    result = run_with_llm(fixed, fake.transport(), lambda llm: call(llm))
    assert result.data is not None and not result.cached


def test_an_endpoint_error_recorded_by_an_older_version_is_asked_again(settings, fake):
    async def poison_then_call(llm):
        key = (await call(llm)).key
        await llm.store.db.flush()
        await llm.store.db.write([("UPDATE calls SET ok=0, response=? WHERE key=?",
                                (orjson.dumps({"error_kind": "EndpointError", "error": "old 401"}).decode(), key))])
        return await call(llm)
    result = run_with_llm(replace(settings, cache="rw"), fake.transport(), poison_then_call)
    assert not result.cached and len(fake.requests) == 2


def test_a_refusal_is_the_recorded_outcome_of_the_request(settings, fake):
    async def handle(request):
        fake.requests.append(request)
        body = orjson.loads(request.content)
        answer = completion(body, "")
        answer["choices"][0]["message"]["refusal"] = "I can't help with that."
        return httpx.Response(200, json=answer)

    async def twice(llm):
        for _ in range(2):
            with pytest.raises(Refusal, match="can't help"):
                await call(llm)
        return await recorded_calls(llm)
    rows = run_with_llm(settings, httpx.MockTransport(handle), twice)
    assert len(fake.requests) == 1 and [r["ok"] for r in rows] == [0]
    assert orjson.loads(rows[0]["response"])["error_kind"] == "Refusal"


def test_a_content_policy_400_is_a_refusal(settings, fake):
    async def handle(request):
        return httpx.Response(400, json={"error": {"message": "Your request was flagged by our safety system",
                                                   "code": "content_policy_violation"}})
    with pytest.raises(Refusal):
        run_with_llm(settings, httpx.MockTransport(handle), lambda llm: call(llm))


def test_credentials_are_scrubbed_from_endpoint_errors(settings):
    echo = FakeOpenAI()
    echo.api_key = "sk-right-000000"
    with pytest.raises(EndpointError) as info:
        run_with_llm(replace(settings, api_key="sk-echoed-secret-42"), echo.transport(), lambda llm: call(llm))
    assert "sk-echoed-secret-42" not in str(info.value) and "Bearer ***" in str(info.value)

    # A server that is down, behind a base URL with credentials in it (real sockets, no retries).
    dead = replace(settings, base_url="http://alice:pa55word@127.0.0.1:9/v1", max_retries=0)
    with pytest.raises(EndpointError, match="unreachable") as info:
        run_with_llm(dead, None, lambda llm: call(llm))
    assert "pa55word" not in str(info.value) and "alice" not in str(info.value)
    assert scrub("token=Bearer abc.def url=https://u:k@h.example/v1 key sk-abcdefgh123") == \
        "token=Bearer *** url=https://***@h.example/v1 key sk-***"


# -- real loopback HTTP ------------------------------------------------------------------------
def test_real_http_calls_keep_to_the_concurrency_limit(settings):
    fake = FakeOpenAI(latency=0.05)
    with serve(fake) as url:
        async def burst(llm):
            async with anyio.create_task_group() as tg:
                for i in range(40):
                    tg.start_soon(lambda i=i: call(llm, seed_parts=(i,)))
        run_with_llm(replace(settings, base_url=url, concurrency=8), None, burst)
        stats = httpx.get(stats_url(url)).json()
    assert stats["requests"] == 40 and stats["max_in_flight"] == 8


@pytest.mark.parametrize("where", ["flag", "env", "default"])
def test_a_fleet_works_wherever_a_base_url_can_be_given(tmp_path, where):
    fleet = ["http://gpu-a.test/v1", "http://gpu-b.test/v1"]
    kwargs: dict = {"db": tmp_path / "fleet.db", "model": "m", "env": {}}
    if where == "flag":
        kwargs["base_url"] = ",".join(fleet)
    elif where == "env":
        kwargs["env"] = {"MEMAUDIT_BASE_URL": ", ".join(fleet)}
    else:
        config = tmp_path / "fleet.toml"
        config.write_text(f'[default]\nbase_url = {orjson.dumps(fleet).decode()}\nmodel = "m"\n')
        kwargs["config"] = config
    settings = load_settings(**kwargs)
    assert settings.role("slot_fill").base_urls == tuple(fleet)
    hosts, _ = burst_over_fleet(settings, 20)
    assert hosts.count("gpu-a.test") == hosts.count("gpu-b.test") == 10


# -- messages and hashes -----------------------------------------------------------------------
def test_a_server_reported_overflow_says_so_without_none(settings, fake):
    fake.faults = ["overflow"]
    with pytest.raises(ContextOverflow) as info:
        run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    assert "None" not in str(info.value) and "does not fit" in str(info.value)


def test_text_hashes_keep_their_own_scheme():
    assert TEXT_HASH_SCHEME == "s1"  # the value existing stores hold: changing it re-keys every vector
    assert text_hash("a memory") == "s1:" + hashlib.sha256(b"a memory").hexdigest()


def test_credentials_in_a_base_url_become_basic_auth_beside_or_instead_of_a_key(settings):
    fake = FakeOpenAI()
    seen = []

    def reply(path, authorization, content):
        seen.append(authorization)
        return FakeOpenAI.reply(fake, path, authorization, content)
    fake.reply = reply
    with serve(fake) as url:
        with_userinfo = url.replace("http://", "http://alice:pa55word@")
        run_with_llm(replace(settings, base_url=with_userinfo), None, lambda llm: call(llm))
        run_with_llm(replace(settings, base_url=with_userinfo, api_key="sk-key-000000"), None,
                     lambda llm: call(llm, seed_parts=(2,)))
    assert seen[0].startswith("Basic ") and seen[1] == "Bearer sk-key-000000"


class OddFields(FakeOpenAI):
    """A server whose answers carry fields in shapes a client must survive: content as a list of
    parts (valid OpenAI), usage counts that are not numbers."""

    def completion(self, body, text):
        answer = super().completion(body, text)
        answer["choices"][0]["message"]["content"] = [{"type": "text", "text": text[:3]},
                                                      {"type": "image_url", "image_url": {"url": "x"}},
                                                      {"type": "text", "text": text[3:]}]
        answer["usage"] = {"prompt_tokens": "abc", "completion_tokens": None,
                           "prompt_tokens_details": "n/a", "completion_tokens_details": {"reasoning_tokens": -4}}
        return answer


def test_server_controlled_fields_in_odd_shapes_never_crash_the_client(settings):
    fake = OddFields().on("agent", lambda body: {"answer": "4"})
    with serve(fake) as url:
        result = run_with_llm(replace(settings, base_url=url), None, lambda llm: call(llm))
    assert result.data == {"answer": "4"}  # the text parts joined, the image part left out
    assert result.usage["prompt_tokens"] == 0 and result.usage["completion_tokens"] == 0
    assert result.usage["reasoning_tokens"] == 0
