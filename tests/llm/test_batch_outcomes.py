"""Every kind of answer a batch line can carry is recorded in the call cache exactly as the live path
records the same answer: a valid one, one that needs repair, one that stays invalid, a content
refusal, a context overflow, a retryable status, a refused parameter."""
from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from memaudit.errors import BadInput, ContextOverflow, InvalidOutput
from memaudit.llm.batch import BatchCollector, BatchPending, Collector, import_output, submit
from memaudit.roles import ROLE_SPECS
from memaudit.runtime import open_runtime
from memaudit.testing.fake_openai import FakeOpenAI, completion

pytestmark = pytest.mark.anyio

CASES = ("ok", "repair", "invalid", "refused", "overflow", "flaky")
SCHEMA = ROLE_SPECS["slot_fill"].schema


class ScriptedModel(FakeOpenAI):
    """Answers by the case named in the prompt, whoever asks (live or a batch line)."""

    def __init__(self):
        super().__init__()
        self.flaky_seen = 0

    def reply(self, path, authorization, content):
        body = orjson.loads(content)
        prompt = str(body["messages"])
        self.requests.append(body)
        if "case flaky" in prompt:
            self.flaky_seen += 1
            if self.flaky_seen == 1:
                return self._status(503, {"error": {"message": "overloaded"}})
        if "case overflow" in prompt:
            return self._status(400, {"error": {"message": "maximum context length exceeded",
                                                "code": "context_length_exceeded"}})
        if "case refused" in prompt:
            answer = completion(body, "")
            answer["choices"][0]["message"]["refusal"] = "I cannot help with that."
            return self._status(200, answer)
        repaired = "Answer again" in prompt
        if "case invalid" in prompt or ("case repair" in prompt and not repaired):
            return self._status(200, completion(body, "{not json"))
        return self._status(200, completion(body, orjson.dumps({"label": "a label", "reason": "because"}).decode()))


def messages(case: str) -> list[dict]:
    return [{"role": "system", "content": "Fill the slot."}, {"role": "user", "content": f"case {case}"}]


async def call(rt, case: str) -> str:
    try:
        await rt.llm.call("slot_fill", messages(case), max_tokens=160, schema=SCHEMA, seed_parts=(case,))
        return "ok"
    except (InvalidOutput, ContextOverflow) as exc:
        return type(exc).__name__


async def rows(rt) -> dict:
    await rt.store.flush()
    return {r["key"]: (r["ok"], r["response"], r["request"], r["prompt_tokens"], r["completion_tokens"])
            for r in await rt.store.fetchall("SELECT * FROM calls")}


def run_lines(model: FakeOpenAI, content: bytes) -> bytes:
    """vLLM's batch runner over one input file."""
    out = []
    for raw in content.splitlines():
        line = orjson.loads(raw)
        status, payload, _ = model.reply(line["url"], None, orjson.dumps(line["body"]))
        out.append({"id": "x", "custom_id": line["custom_id"], "error": None,
                    "response": {"status_code": status, "request_id": "x", "body": payload}})
    return b"".join(orjson.dumps(line) + b"\n" for line in out)


async def test_every_outcome_is_recorded_as_the_live_path_records_it(settings, tmp_path):
    live_model = ScriptedModel()
    async with open_runtime(replace(settings, db=tmp_path / "live.db"), transport=live_model.transport()) as rt:
        live_outcomes = {case: await call(rt, case) for case in CASES}
        live_rows = await rows(rt)
    assert live_outcomes == {"ok": "ok", "repair": "ok", "invalid": "InvalidOutput", "refused": "Refusal",
                             "overflow": "ContextOverflow", "flaky": "ok"}

    batch_model = ScriptedModel()
    batch_settings = replace(settings, db=tmp_path / "batch.db")
    async with open_runtime(batch_settings, transport=batch_model.transport()) as rt:
        collector = Collector(rt.store, batch_settings, {"slot_fill": ROLE_SPECS["slot_fill"].check},
                              rt.llm.refusals)
        for round_ in range(1, 6):
            with rt.llm.batching(BatchCollector(rt.store, rt.llm.refusals)) as pending:
                outcomes = {}
                for case in CASES:
                    try:
                        outcomes[case] = await call(rt, case)
                    except BatchPending:
                        outcomes[case] = "pending"
            if not pending.keys:
                break
            said = await submit(rt.store, batch_settings, tmp_path / f"round{round_}")
            for line in said:
                path = tmp_path / line.rsplit(" to ", 1)[1]
                output = path.with_suffix(".out")
                output.write_bytes(run_lines(batch_model, path.read_bytes()))
                await import_output(collector, output)
        assert outcomes == live_outcomes
        # answers; the first repairs and the 503 sent again; the last repair; nothing left
        assert round_ == 4
        batch_rows = await rows(rt)
        assert await rt.store.batches.queued() == []
    assert batch_rows.keys() == live_rows.keys()
    for key, (ok, response, request, prompt_tokens, completion_tokens) in live_rows.items():
        assert batch_rows[key] == (ok, response, request, prompt_tokens, completion_tokens)
    sent_live = {orjson.dumps(b) for b in live_model.requests}
    assert {orjson.dumps(b) for b in batch_model.requests} == sent_live  # the same bodies, repairs included


async def test_a_refused_parameter_is_learned_and_asked_again_under_the_new_key(settings, tmp_path):
    model = FakeOpenAI(reasoning=True)  # refuses temperature 0 on a model whose name it does not know
    settings = replace(settings, db=tmp_path / "b.db")
    async with open_runtime(settings, transport=model.transport()) as rt:
        collector = Collector(rt.store, settings, {}, rt.llm.refusals)
        for round_ in (1, 2):
            with rt.llm.batching(BatchCollector(rt.store, rt.llm.refusals)):
                with pytest.raises(BatchPending) as first:
                    await rt.llm.call("slot_fill", messages("ok"), max_tokens=160, schema=SCHEMA)
            await rt.store.flush()
            body = orjson.loads((await rt.store.batches.request(first.value.key))["body"])
            assert ("temperature" in body) == (round_ == 1)
            await submit(rt.store, settings, tmp_path / f"files{round_}")
            (written,) = (tmp_path / f"files{round_}").glob("*.jsonl")
            out = tmp_path / f"out{round_}.jsonl"
            out.write_bytes(run_lines(model, written.read_bytes()))
            await import_output(collector, out)
        assert await rt.store.calls.refused_params() == [("fake-model", "openai", "temperature")]
        assert await rt.store.batches.queued() == []
        assert (await rt.llm.call("slot_fill", messages("ok"), max_tokens=160, schema=SCHEMA)).cached


async def test_an_output_line_without_a_custom_id_is_one_line_naming_it(settings, tmp_path):
    async with open_runtime(replace(settings, db=tmp_path / "c.db"), transport=FakeOpenAI().transport()) as rt:
        bad = tmp_path / "out.jsonl"
        bad.write_text('{"id": "x"}\n')
        with pytest.raises(BadInput, match="line 1: not a batch output line"):
            await import_output(Collector(rt.store, rt.settings, {}, rt.llm.refusals), bad)
