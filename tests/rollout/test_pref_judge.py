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


async def test_judge_failures_are_counted_in_the_summary_and_table2(open_rt, fake, bench):
    """The judge invalid on some turns: D is over the turns left, and the failures are counted
    (the rollout summary, Table 2), never silently dropped."""
    from memaudit.rollout.runner import run_rollout
    from memaudit.tables.paper import compute_tables
    from memaudit.tables.paper_render import render

    # Invalid on every attempt (repairs included) for user_002, whose preferences the prompt quotes.
    fake.on("pref_judge", lambda body: "{broken" if "of user_002" in str(body["messages"])
            else ratings("5", "4", "3", "2", "1")(body))
    fake.on("simulator", lambda body: {"feedback_type": "continue", "text": "More, please.", "reason": "r"})
    async with open_rt() as rt:
        await rt.store.benchmarks.save(bench)
        await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=4, progress=False)
        outcome = await rt.store.episodes.outcomes("nomem")
        [row] = (await compute_tables(rt.store, ["nomem"], bootstrap=0))["table2"]
        text = render({"table2": [row]}, "md")
    assert outcome["judge_failures"] == 4 and row["pref_judge_failures"] == 4  # user_002's four turns
    assert row["D"] == 3.0  # over user_001's rated turns only
    assert "judge failures" in text
