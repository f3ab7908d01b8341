"""Request bodies per dialect and hosted reasoning models: names, budgets, what is sent and keyed,
reasoning_effort from the config, and refusals learned from a 400."""
from __future__ import annotations

from dataclasses import replace

import pytest

from memaudit.config import load_settings
from memaudit.errors import BadInput
from memaudit.llm.dialects import DIALECTS, REASONING_BUDGET, request_body
from memaudit.testing import FakeOpenAI
from tests.llm.test_client import MESSAGES, call, run_with_llm


@pytest.mark.parametrize("model", ["gpt-5", "gpt-5.4-mini", "gpt-5-nano-2025-08-07", "o1", "o3-mini", "o4-mini",
                                   "openai/gpt-5.1", "ft:gpt-5-mini:acme::abc123"])
def test_reasoning_models_by_name(model):
    assert DIALECTS["openai"].is_reasoning_model(model)


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4.1", "omni-7b", "smollm2-135m-instruct", "Mem-T-4B",
                                   "gpt-50-turbo", "pro1-7b"])
def test_other_models_by_name(model):
    assert not any(dialect.is_reasoning_model(model) for dialect in DIALECTS.values())


def body(backend, **kw):
    fields = dict(backend=backend, model="m", messages=MESSAGES, temperature=0.0, top_p=None, max_tokens=50,
                  seed=1, schema=None, schema_name="agent")
    return request_body(**{**fields, **kw})


def test_the_token_budget_goes_by_its_name_in_each_dialect():
    assert body("openai")["max_completion_tokens"] == 50 and "max_tokens" not in body("openai")
    assert body("vllm")["max_tokens"] == 50 and body("llamacpp")["max_tokens"] == 50
    assert body("vllm", refused=frozenset({"max_tokens"}))["max_completion_tokens"] == 50


def test_left_out_fields_are_not_sent():
    sent = body("openai", temperature=None, max_tokens=None, reasoning_effort="low")
    assert "temperature" not in sent and "top_p" not in sent and "max_completion_tokens" not in sent
    assert sent["reasoning_effort"] == "low"


def test_a_reasoning_model_is_sent_its_temperature_and_a_reasoning_budget(settings):
    """The name decides the budget, never the temperature (the published study's gpt-5.4-mini took it)."""
    fake = FakeOpenAI()
    settings = replace(settings, model="gpt-5.4-mini")
    run_with_llm(settings, fake.transport(), lambda llm: call(llm, temperature=0.7, max_tokens=60))
    assert fake.requests[0]["temperature"] == 0.7 and fake.requests[0]["max_completion_tokens"] == REASONING_BUDGET


def test_a_reasoning_model_that_refuses_the_temperature_is_sent_none(settings):
    fake = FakeOpenAI(reasoning=True)
    settings = replace(settings, model="gpt-5.4-mini")
    result = run_with_llm(settings, fake.transport(), lambda llm: call(llm, temperature=0.7, max_tokens=60))
    assert [("temperature" in r) for r in fake.requests] == [True, False] and fake.status_counts[400] == 1
    assert fake.requests[1]["max_completion_tokens"] == REASONING_BUDGET and result.usage["reasoning_tokens"] == 16
    # Another requested temperature is the same request to this model: the same key.
    again = run_with_llm(settings, fake.transport(), lambda llm: call(llm, temperature=0.0, max_tokens=60))
    assert again.cached and again.key == result.key


def test_a_configured_budget_and_effort_are_sent_as_configured(tmp_path, settings):
    config = tmp_path / "c.toml"
    config.write_text('[roles.agent]\nmax_tokens = 300\nreasoning_effort = "minimal"\n')
    settings = load_settings(db=settings.db, base_url="http://fake.test/v1", model="gpt-5.4-mini",
                             config=str(config), env={})
    fake = FakeOpenAI()
    with_effort = run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    assert fake.requests[0]["reasoning_effort"] == "minimal" and fake.requests[0]["max_completion_tokens"] == 300
    settings = replace(settings, role_sections={"agent": {"max_tokens": 300}})
    without = run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    assert "reasoning_effort" not in fake.requests[1] and without.key != with_effort.key


def test_an_unknown_reasoning_effort_is_one_line(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[roles.recovery_judge]\nreasoning_effort = "maximal"\n')
    with pytest.raises(BadInput, match="roles.recovery_judge.reasoning_effort"):
        load_settings(config=str(config), env={})


def test_a_refused_temperature_is_asked_again_without_it_and_remembered(settings):
    fake = FakeOpenAI(reasoning=True)
    settings = replace(settings, model="house-model")  # not known by name
    first = run_with_llm(settings, fake.transport(), lambda llm: call(llm, temperature=0.3))
    assert [("temperature" in r) for r in fake.requests] == [True, False] and fake.status_counts[400] == 1
    # A new client on the same store: the refusal is known before the first request.
    second = run_with_llm(settings, fake.transport(), lambda llm: call(llm, temperature=0.3, messages=[
        {"role": "user", "content": "another question"}]))
    assert "temperature" not in fake.requests[2] and fake.status_counts[400] == 1
    assert not first.cached and not second.cached


def test_other_400s_are_not_taken_for_refusals(settings):
    fake = FakeOpenAI()
    fake.faults = [400]
    with pytest.raises(Exception, match="injected 400"):
        run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    assert len(fake.requests) == 1


def test_the_backend_names_are_the_registered_dialects():
    from memaudit.cli.common import GLOBAL_OPTIONS  # noqa: F401  (the --backend choices are built from DIALECTS)
    from memaudit.config import BACKENDS
    from memaudit.llm.dialects import DIALECTS

    assert tuple(DIALECTS) == BACKENDS
    assert all(name == dialect.name for name, dialect in DIALECTS.items())
