"""Issue 42, findings 3-6 at the model client: every odd answer is a recorded, replayable failure
or a number treated as unknown, never a crash: tool arguments nested thousands deep, thousands of
parallel tool calls, a server that calls tools only when one is named, usage above 2^63 or not a
count, and a `--tpm` smaller than one request."""
from __future__ import annotations

from dataclasses import replace

import anyio
import httpx
import orjson
import pytest

from memaudit.errors import BadInput, EndpointError, InvalidOutput
from memaudit.llm.ratelimit import Budget, Pacer
from memaudit.llm.tools import MAX_TOOL_CALLS
from memaudit.testing.fake_openai import FakeOpenAI, completion
from tests.llm.test_client import call, run_with_llm

TOOLS = {"tools": [{"type": "function", "function": {"name": "note", "parameters": {
    "type": "object", "properties": {"text": {"type": "string"}}}}}], "tool_choice": "required"}
DEEP = '{"text": ' * 5000 + '"x"' + "}" * 5000  # deeper than Python's recursion limit


def answering(answer):
    """A transport whose every chat answer is `answer(body)` (a chat-completions dict)."""
    requests: list = []

    async def handle(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        requests.append(body)
        return httpx.Response(200, json=answer(body))
    return httpx.MockTransport(handle), requests


def with_calls(body: dict, calls: list[dict]) -> dict:
    answer = completion(body, "", "tool_calls")
    answer["choices"][0]["message"].update(content=None, tool_calls=calls)
    return answer


def native(settings):
    return replace(settings, role_sections={"agent": {"backend": "openai"}}, repair_attempts=0)


def test_tool_arguments_nested_thousands_deep_are_a_recorded_invalid_answer(settings):
    transport, requests = answering(lambda body: with_calls(body, [
        {"id": "c1", "type": "function", "function": {"name": "note", "arguments": DEEP}}]))
    settings = native(settings)
    for _ in range(2):  # the second time from the cache: the same failure, no request
        with pytest.raises(InvalidOutput) as failed:
            run_with_llm(settings, transport, lambda llm: call(llm, schema=None, tools=TOOLS))
        assert len(requests) == 1
    assert "not a JSON object" in failed.value.problem or "could not be read" in failed.value.problem


def test_an_exception_reading_an_answer_is_an_invalid_answer(settings):
    """A check that meets what it did not expect (here: raises) makes the answer invalid, recorded."""
    transport, requests = answering(lambda body: completion(body, '{"answer": "4"}'))

    def check(data):
        raise RecursionError("maximum recursion depth exceeded")
    with pytest.raises(InvalidOutput) as failed:
        run_with_llm(replace(settings, repair_attempts=0), transport, lambda llm: call(llm, check=check))
    assert "RecursionError" in failed.value.problem


def test_thousands_of_parallel_tool_calls_are_capped_and_the_rest_counted(settings):
    calls = [{"id": f"c{n}", "type": "function", "function": {"name": "note", "arguments": '{"text": "t"}'}}
             for n in range(5000)]
    transport, _ = answering(lambda body: with_calls(body, calls))
    result = run_with_llm(native(settings), transport, lambda llm: call(llm, schema=None, tools=TOOLS))
    assert len(result.tool_calls) == MAX_TOOL_CALLS
    assert result.usage["tool_calls_dropped"] == 5000 - MAX_TOOL_CALLS


def test_a_server_calling_tools_only_when_one_is_named_fails_the_probe(settings):
    fake = FakeOpenAI()
    fake.tools_only_when_named = True
    with pytest.raises(EndpointError) as failed:
        run_with_llm(native(settings), fake.transport(), lambda llm: llm.check_native_tools("agent"))
    assert "only when the request names it" in str(failed.value) and "\n" not in str(failed.value)
    assert run_with_llm(native(settings), FakeOpenAI().transport(), lambda llm: llm.check_native_tools("agent")) is None


@pytest.mark.parametrize("count", [2**64, 1e20, 1e308, -5, "abc", 1.5, None, [1]])
@pytest.mark.parametrize("tpm", [None, 1_000_000])
def test_usage_that_is_no_count_is_unknown_never_a_crash(settings, count, tpm):
    def answer(body):
        answer = completion(body, '{"answer": "4"}')
        answer["usage"] = {"prompt_tokens": count, "completion_tokens": 3, "total_tokens": count}
        return answer
    transport, _ = answering(answer)
    result = run_with_llm(replace(settings, tpm=tpm), transport, lambda llm: call(llm))
    assert result.usage["prompt_tokens"] == 0 and "unknown" in result.usage
    stored = run_with_llm(replace(settings, tpm=tpm), transport, lambda llm: call(llm))  # from the cache
    assert stored.cached and stored.usage == result.usage


def test_a_negative_usage_gives_no_budget_back():
    async def main():
        pacer = Pacer(Budget(tpm=600), clock=lambda: 0.0, sleep=anyio.sleep)
        ticket = await pacer.turn(100)
        before = pacer.next_tokens
        ticket.settle(None)  # what a usage of -5 tokens settles with (dialects.reported_tokens)
        assert pacer.next_tokens == before
    anyio.run(main)


def test_a_tpm_smaller_than_one_request_is_refused_in_one_line(settings):
    transport, requests = answering(lambda body: completion(body, '{"answer": "4"}'))
    with pytest.raises(BadInput) as refused:
        run_with_llm(replace(settings, tpm=1), transport, lambda llm: call(llm))
    assert "--tpm" in str(refused.value) and "\n" not in str(refused.value) and not requests
