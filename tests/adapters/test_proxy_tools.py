"""Tool calls through the recording proxy, on every path a call can take: forwarded natively,
emulated by structured output (each dialect's own way, DIALECTS enumerated), replayed from the
cache with no server, and collected from a batch. Every `tool_choice` form (named, `auto`,
`required`, parallel calls off) is answered in OpenAI's shape, the tools are part of the cache key,
native and emulated answers carry the same calls, and a required call that never comes is a
failure the adapter can count, never an empty success."""
from __future__ import annotations

from dataclasses import replace

import anyio
import httpx
import orjson
import pytest

from memaudit.errors import EndpointError, InvalidOutput
from memaudit.llm.batch import BatchCollector, BatchPending, Collector, import_output, submit
from memaudit.llm.dialects import DIALECTS
from memaudit.llm.proxy import recording_proxy
from memaudit.llm.tools import EMULATED, NATIVE, ToolRequest
from memaudit.runtime import open_runtime
from memaudit.testing.fake_openai import FakeOpenAI
from tests.adapters.conftest import adapter_runtime
from tests.llm.test_batch_outcomes import run_lines

ROLE = "memory:somelib"
TOOLS = [{"type": "function", "function": {"name": "remember", "description": "Keep one fact.", "parameters": {
             "type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}}},
         {"type": "function", "function": {"name": "forget", "description": "Drop a fact.", "parameters": {
             "type": "object", "properties": {"id": {"type": "string"}, "why": {"$ref": "#/$defs/Why"}},
             "required": ["id", "why"], "$defs": {"Why": {"type": "string", "enum": ["wrong", "stale"]}}}}}]
# Every tool_choice form, with the calls the fake makes for it: (tool, how many).
CHOICES = {
    "auto": ({}, ("remember", 2)),
    "required": ({"tool_choice": "required"}, ("remember", 2)),
    "any": ({"tool_choice": "any"}, ("remember", 2)),
    "named": ({"tool_choice": {"type": "function", "function": {"name": "forget"}}}, ("forget", 1)),
    "one call": ({"tool_choice": "required", "parallel_tool_calls": False}, ("remember", 1)),
}
BACKENDS = sorted(DIALECTS)


def body(choice: str, said: str = "I moved to Munich.") -> dict:
    return {"model": "whatever", "temperature": 0, "tools": TOOLS, **CHOICES[choice][0],
            "messages": [{"role": "system", "content": "You keep memories."}, {"role": "user", "content": said}]}


def post(url: str, request: dict) -> httpx.Response:
    return httpx.post(url + "/chat/completions", json=request, timeout=30)


async def ask(route, request: dict) -> httpx.Response:
    with route.calls_from_here():
        return await anyio.to_thread.run_sync(post, route.base_url, request)


def calls_of(answer: httpx.Response) -> list[tuple[str, dict]]:
    choice = answer.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    calls = choice["message"]["tool_calls"]
    assert len({c["id"] for c in calls}) == len(calls) and all(c["type"] == "function" for c in calls)
    return [(c["function"]["name"], orjson.loads(c["function"]["arguments"])) for c in calls]


def test_every_dialect_has_a_tool_path_and_both_paths_are_covered():
    assert {DIALECTS[backend].tool_calls for backend in BACKENDS} == {NATIVE, EMULATED}


async def answers_on(backend: str, settings, fake) -> dict:
    async with adapter_runtime("nomem", replace(settings, backend=backend), fake) as (_, rt):
        route = (await recording_proxy(rt.llm)).route(ROLE, rt.embedder)
        return {choice: calls_of(await ask(route, body(choice))) for choice in CHOICES}


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_tool_choice_is_answered_in_openai_shape_on_each_dialect(backend, settings, fake):
    answers = anyio.run(answers_on, backend, settings, fake)
    for choice, (_, (tool, count)) in CHOICES.items():
        assert [name for name, _ in answers[choice]] == [tool] * count, choice
    assert answers["named"][0][1]["why"] in ("wrong", "stale")  # a $ref'd parameter followed
    sent = [r for r in fake.requests if "record_word" not in str(r)]
    if DIALECTS[backend].tool_calls == NATIVE:
        assert all(r["tools"] == TOOLS and "response_format" not in r for r in sent)
        assert [r.get("tool_choice") for r in sent] == [CHOICES[c][0].get("tool_choice") for c in CHOICES]
    else:
        assert not any("tools" in r for r in sent) and all("response_format" in r for r in sent)
        assert len(sent) == len(CHOICES) - 1  # `any` is emulated as `required`: the same request
        assert all("- forget: " in r["messages"][0]["content"] for r in sent)  # the tools are described


def test_native_and_emulated_answers_make_the_same_calls(settings):
    native = anyio.run(answers_on, "openai", settings, FakeOpenAI())
    for backend in BACKENDS:
        assert anyio.run(answers_on, backend, settings, FakeOpenAI()) == native, backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_tools_are_part_of_the_key_and_replay_answers_without_a_server(backend, settings, fake):
    settings = replace(settings, backend=backend)

    async def main():
        async with adapter_runtime("nomem", settings, fake) as (_, rt):
            route = (await recording_proxy(rt.llm)).route(ROLE, rt.embedder)
            first = [(await ask(route, body(choice))).json() for choice in CHOICES]
            asked = len(fake.requests)
            assert [(await ask(route, body(choice))).json() for choice in CHOICES] == first  # cached
            other = {**body("auto"), "tools": TOOLS[:1]}
            await ask(route, other)
            assert len(fake.requests) == asked + 1  # other tools, another key
        down = FakeOpenAI()
        down.faults = [500] * 1000
        async with adapter_runtime("nomem", replace(settings, cache="replay"), down) as (_, rt):
            route = (await recording_proxy(rt.llm)).route(ROLE, rt.embedder)
            assert [(await ask(route, body(choice))).json() for choice in CHOICES] == first
            assert down.requests == []
    anyio.run(main)


def test_a_required_call_that_never_comes_is_a_failure_and_auto_text_is_an_answer(settings, fake):
    async def main():
        async with adapter_runtime("nomem", settings, fake) as (_, rt):
            route = (await recording_proxy(rt.llm)).route(ROLE, rt.embedder)
            assert (await ask(route, body("auto"))).status_code == 200  # the endpoint honours tools
            fake.ignore_tools = True  # from now on it answers in text
            for choice in ("required", "named"):
                failed = await ask(route, body(choice))
                assert failed.status_code == 400 and isinstance(route.error, InvalidOutput), choice
                assert "requires a tool call" in route.error.problem
            text = await ask(route, body("auto", "Nothing new."))
            assert text.status_code == 200 and route.error is None
            assert text.json()["choices"][0]["message"]["content"] and "tool_calls" not in text.json()["choices"][0]["message"]
    anyio.run(main)


def test_an_emulated_required_call_answered_with_none_is_a_failure(settings, fake):
    fake.on("memory_somelib", lambda body: {"tool_calls": []})  # the vllm dialect names the schema by role

    async def main():
        async with adapter_runtime("nomem", replace(settings, backend="vllm"), fake) as (_, rt):
            route = (await recording_proxy(rt.llm)).route(ROLE, rt.embedder)
            failed = await ask(route, body("required"))
            assert failed.status_code == 400 and isinstance(route.error, InvalidOutput)
            assert len(fake.requests) == settings.repair_attempts + 1  # repaired, then given up
    anyio.run(main)


def test_a_native_endpoint_that_ignores_tools_stops_the_command_and_is_not_recorded(settings, fake):
    fake.ignore_tools = True

    async def main():
        async with adapter_runtime("nomem", settings, fake) as (_, rt):
            route = (await recording_proxy(rt.llm)).route(ROLE, rt.embedder)
            refused = await ask(route, body("auto"))
            assert refused.status_code == 400 and isinstance(route.error, EndpointError)
            assert "ignores `tools`" in str(route.error)
            await rt.store.flush()
            assert await rt.store.fetchall("SELECT key FROM calls") == []
    anyio.run(main)


def test_a_batched_call_keeps_its_tools_and_its_answer_is_the_live_one(settings, tmp_path):
    request = ToolRequest.of(body("required"))
    messages = body("required")["messages"]

    async def live():
        async with open_runtime(replace(settings, db=tmp_path / "live.db"), transport=FakeOpenAI().transport()) as rt:
            return (await rt.llm.call(ROLE, messages, tools=request.fields())).tool_calls

    async def batched():
        model = FakeOpenAI()
        batch_settings = replace(settings, db=tmp_path / "batch.db")
        async with open_runtime(batch_settings, transport=model.transport()) as rt:
            with rt.llm.batching(BatchCollector(rt.store, rt.llm.refusals)):
                with pytest.raises(BatchPending):
                    await rt.llm.call(ROLE, messages, tools=request.fields())
            for line in await submit(rt.store, batch_settings, tmp_path / "files"):
                path = tmp_path / line.rsplit(" to ", 1)[1]
                assert orjson.loads(path.read_bytes().splitlines()[0])["body"]["tools"] == TOOLS
                path.with_suffix(".out").write_bytes(run_lines(model, path.read_bytes()))
                await import_output(Collector(rt.store, batch_settings, {}, rt.llm.refusals), path.with_suffix(".out"))
            return (await rt.llm.call(ROLE, messages, tools=request.fields())).tool_calls

    expected = anyio.run(live)
    assert [c["function"]["name"] for c in expected] == ["remember", "remember"]
    assert anyio.run(batched) == expected
