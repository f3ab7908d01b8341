"""The preference judge: na handling, unscorable turns, failures recorded (never 0)."""
from __future__ import annotations

import pytest

from memaudit.rollout.pref_judge import judge_reply

pytestmark = pytest.mark.anyio


def ratings(*scores):
    return lambda body: {"ratings": {str(i): s for i, s in enumerate(scores, 1)}, "summary": "ok"}


async def test_mean_of_the_integer_ratings_ignores_na(open_rt, fake, bench):
    fake.on("pref_judge", ratings("4", "na", "2", "na", "3"))
    prefs = bench.users[0].entries("assistance_preference")
    async with open_rt() as rt:
        result = await judge_reply(rt.llm, prefs, "task", "reply", seed_parts=("u", 1, 1))
    assert result.score == 3.0
    assert [p["score"] for p in result.per_pref] == [4, "na", 2, "na", 3]
    assert [p["dimension"] for p in result.per_pref] == [p.dimension for p in prefs]


async def test_all_na_is_unscorable(open_rt, fake, bench):
    fake.on("pref_judge", ratings(*["na"] * 5))
    async with open_rt() as rt:
        result = await judge_reply(rt.llm, bench.users[0].entries("assistance_preference"), "t", "r",
                                   seed_parts=())
    assert result.score is None


async def test_no_preferences_means_no_call(open_rt, fake):
    async with open_rt() as rt:
        result = await judge_reply(rt.llm, [], "t", "r", seed_parts=())
    assert result.score is None and fake.requests == []


async def test_missing_ratings_are_repaired_then_recorded_as_failure(open_rt, fake, bench):
    fake.on("pref_judge", ratings("5", "5"))  # only two of five preferences, every time
    async with open_rt() as rt:
        result = await judge_reply(rt.llm, bench.users[0].entries("assistance_preference"), "t", "r",
                                   seed_parts=())
        assert rt.llm.stats["pref_judge"].failures == 1
    assert result.score is None
    assert len(result.per_pref) == 5 and all(p["score"] is None and "error" in p for p in result.per_pref)
    assert len(fake.requests) == 3  # first answer plus the repair attempts
