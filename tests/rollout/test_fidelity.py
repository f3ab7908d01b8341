"""The rollout as the published runner ran it, checked on the requests a configured endpoint gets:
no output caps on the dialogue, an unbounded simulated user, and an assistant that is never told
what is scored."""
from __future__ import annotations

import re
from types import SimpleNamespace

import orjson
import pytest

from memaudit.config import EMBEDDED_SIMULATOR_TEXT_CHARS, load_settings
from memaudit.rollout.runner import run_rollout
from memaudit.rollout.simulator import reply_schema
from memaudit.testing.fake_openai import schema_name
from memaudit.types import CATEGORIES

pytestmark = pytest.mark.anyio

SYSTEMS = ["nomem", "longctx_full", "amem", "mem0"]
# Every way a category of the bank could be named: its key, the key as words, the words of the tables.
CATEGORY_WORDS = re.compile("|".join([*CATEGORIES, *(c.replace("_", " ") for c in CATEGORIES),
                                      r"\bskills?\b", r"\bknowledge\b", r"\bepisodic\b", r"self-model",
                                      r"\bpreferences?\b"]), re.I)


def sim(body):
    return {"feedback_type": "followup", "text": "Honestly I would rather not get into the details yet."}


async def rollout(open_rt, fake, bench):
    fake.on("simulator", sim)
    fake.on_text(lambda body: "Here is a plan you can use today: first this, then that.")
    async with open_rt() as rt:
        await run_rollout(rt, bench, SYSTEMS, users=["user_001"], tasks=2, max_turns=2, progress=False)
    return [r for r in fake.requests if "response_format" not in r], \
        [r for r in fake.requests if schema_name(r) == "simulator"]


async def test_no_output_cap_on_the_dialogue_of_a_configured_endpoint(open_rt, fake, bench):
    agent, simulator = await rollout(open_rt, fake, bench)
    assert agent and simulator
    assert all("max_tokens" not in r and "max_completion_tokens" not in r for r in agent + simulator)
    text = simulator[0]["response_format"]["json_schema"]["schema"]["properties"]["text"]
    assert "maxLength" not in text


async def test_the_assistant_never_sees_a_category_of_the_bank(open_rt, fake, bench):
    agent, _ = await rollout(open_rt, fake, bench)
    for request in agent:
        found = CATEGORY_WORDS.search(orjson.dumps(request["messages"]).decode())
        assert found is None, found


async def test_the_simulator_sees_the_turn_number(open_rt, fake, bench):
    _, simulator = await rollout(open_rt, fake, bench)
    turns = [re.search(r"\(turn (\d+):", r["messages"][-1]["content"]).group(1) for r in simulator[:2]]
    assert turns == ["1", "2"]


def test_only_the_embedded_model_bounds_what_the_user_says():
    embedded = SimpleNamespace(settings=load_settings(env={}))
    configured = SimpleNamespace(settings=load_settings(base_url="http://x/v1", model="m", env={}))
    assert reply_schema(embedded)["properties"]["text"]["maxLength"] == EMBEDDED_SIMULATOR_TEXT_CHARS
    assert "maxLength" not in reply_schema(configured)["properties"]["text"]
