"""Issue 42, finding 1 at the unit level: which configured values are secrets, and that an answer,
a tool call's arguments, an error body and a batch result line lose them before they are cached."""
from __future__ import annotations

import base64
from dataclasses import replace

from memaudit.config import load_settings
from memaudit.llm.secrets import Secrets, configured, counting_echoes, url_secrets
from memaudit.testing.fake_openai import FakeOpenAI
from tests.llm.test_client import call, run_with_llm

KEY = "sk-the-configured-key-0123456789"
QUERY_KEY = "QUERYKEY-of-the-host-42"


def test_secrets_come_from_every_key_and_url_that_can_carry_one(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", "judge-key-abcdefgh")
    settings = replace(load_settings(db=tmp_path / "m.db", model="m", base_url=f"http://h/v1?api-key={QUERY_KEY}&api-version=2024-06-01"),
                       api_key=KEY, embed_base_url="http://me:embed-password@e/v1",
                       judge_sections={"j": {"api_key_env": "JUDGE_KEY"}})
    found = set(configured(settings).values)
    assert {KEY, QUERY_KEY, "judge-key-abcdefgh", "embed-password", "me:embed-password",
            base64.b64encode(b"me:embed-password").decode()} <= found
    assert "2024-06-01" not in found  # a setting in the query, not a key
    assert url_secrets("http://h/v1") == []


def test_a_short_key_is_no_secret_to_scrub():
    """A local server's `EMPTY` or `x` would otherwise be cut out of every ordinary word."""
    assert Secrets.of(["EMPTY", "x"]).text("EMPTY boxes") == "EMPTY boxes"


def test_every_string_of_an_answer_is_cleaned_and_counted():
    secrets = Secrets.of([KEY])
    nested: list = [f"deep {KEY}"]
    for _ in range(5000):  # deeper than Python's recursion
        nested = [nested]
    with counting_echoes() as echoes:
        answer = secrets.answer({"choices": [{"message": {"content": f"x {KEY}", KEY: 1}}], "n": nested})
    assert answer["choices"][0]["message"] == {"content": "x ***", "***": 1} and echoes.count == 3
    bottom = answer["n"]
    while isinstance(bottom, list):
        bottom = bottom[0]
    assert bottom == "deep ***"
    assert secrets.body(f'{{"error": "bad {KEY}"}}'.encode()) == b'{"error": "bad ***"}'


def test_an_echoing_server_leaves_no_key_in_the_cache(settings, tmp_path):
    fake = FakeOpenAI()
    fake.api_key, fake.echo_key = KEY, True
    settings = replace(settings, api_key=KEY)
    with counting_echoes() as echoes:
        result = run_with_llm(settings, fake.transport(), lambda llm: call(llm, schema=None))
    assert result.text.endswith("(sent with Bearer ***)") and echoes.count == 1
    assert not any(KEY.encode() in p.read_bytes() for p in settings.db.parent.glob("test.db*"))


def test_a_tool_call_echoing_the_key_loses_it(settings):
    fake = FakeOpenAI()
    fake.echo_key = True
    settings = replace(settings, api_key=KEY, role_sections={"agent": {"backend": "openai"}})
    tools = {"tools": [{"type": "function", "function": {"name": "note", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}}}}}], "tool_choice": "required"}
    result = run_with_llm(settings, fake.transport(), lambda llm: call(llm, schema=None, tools=tools))
    assert result.tool_calls and all(KEY not in c["function"]["arguments"] and "***" in c["function"]["arguments"]
                                     for c in result.tool_calls)


def test_an_error_body_echoing_the_key_loses_it_before_it_is_recorded(settings):
    fake = FakeOpenAI()
    fake.fault_for = lambda body: 403  # a refusal whose body quotes the key
    fake.fault_reply = lambda fault: fake._status(400, {"error": {"message": f"content_filter flagged {KEY}"}})
    settings = replace(settings, api_key=KEY)
    try:
        run_with_llm(settings, fake.transport(), lambda llm: call(llm))
    except Exception as exc:  # a Refusal: recorded as the request's outcome
        assert KEY not in str(exc)
    assert not any(KEY.encode() in p.read_bytes() for p in settings.db.parent.glob("test.db*"))
