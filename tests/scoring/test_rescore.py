"""Frozen rescoring: predictions kept, judge model or prompt swapped; or the reader re-fills."""
from __future__ import annotations

import pytest

from memaudit.errors import BadInput
from memaudit.scoring.recovery import score_runs
from memaudit.scoring.rescore import rescore_runs
from memaudit.store import loads
from tests.scoring.recorded import record, requests_for, runtime, script

pytestmark = pytest.mark.anyio

JUDGE_PROMPT = """---
role: recovery_judge (a paraphrase for a robustness check)
---

## system
Score the match between a guessed value and the real one: 0, 0.25, 0.5, 0.75 or 1.0.
Reply as JSON {"score": <number>, "reason": "<sentence>"}.

## user
PARAPHRASED slot {{dimension}}; context {{explanation}}; real {{ground_truth}}; guess {{prediction}}.
"""


async def test_judge_model_variant_rejudges_the_same_predictions(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=3)
        await score_runs(rt, ["longctx_full"], ["dump_all", "retrieve"], context_window=1300)
        fills = len(requests_for(fake, "slot_fill"))
        fake.on("recovery_judge", lambda body: {"score": 1.0 if body["model"] == "judge-2" else 0.0, "reason": "r"})
        await rescore_runs(rt, ["longctx_full"], "judge2", judge_model="judge-2")
        default = await rt.store.scores.load("longctx_full")
        variant = await rt.store.scores.load("longctx_full", variant="judge2")
        passes = await rt.store.fetchall("SELECT * FROM score_passes WHERE variant='judge2' ORDER BY mode")
    assert len(requests_for(fake, "slot_fill")) == fills  # predictions are frozen
    assert [(r.mode, r.user_id, r.dimension, r.label, r.status) for r in default] == \
        [(r.mode, r.user_id, r.dimension, r.label, r.status) for r in variant]
    assert all(r.score == (1.0 if r.status == "ok" else 0.0) for r in variant)
    assert {r.status for r in variant} == {"ok", "overflow"}  # dump_all overflows at 1300, retrieve fits
    config = loads(passes[0]["config"])
    assert config["judge_model"] == "judge-2" and config["rescore"]["judge_model"] == "judge-2"
    assert config["context_window"] == 1300


async def test_judge_prompt_variant_uses_the_other_file(settings, fake, tmp_path):
    script(fake)
    path = tmp_path / "judge_paraphrase.md"
    path.write_text(JUDGE_PROMPT)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=1)
        await score_runs(rt, ["longctx_full"], ["dump_all"])
        before = len(requests_for(fake, "recovery_judge"))
        await rescore_runs(rt, ["longctx_full"], "paraphrase", judge_prompt=str(path))
        rows = await rt.store.scores.load("longctx_full", variant="paraphrase")
    judged = requests_for(fake, "recovery_judge")[before:]
    assert len(judged) == 31 and all("PARAPHRASED slot" in j["messages"][-1]["content"] for j in judged)
    assert len(rows) == 31


async def test_reader_model_variant_fills_again(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=1)
        await score_runs(rt, ["longctx_full"], ["dump_all"])
        await rescore_runs(rt, ["longctx_full"], "reader2", reader_model="reader-2")
        rows = await rt.store.scores.load("longctx_full", variant="reader2")
    assert len(rows) == 31
    assert sum(f["model"] == "reader-2" for f in requests_for(fake, "slot_fill")) == 31


async def test_rescore_needs_a_default_pass_and_a_change(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("nomem",), users=1, tasks=1)
        with pytest.raises(BadInput, match="no default scoring pass"):
            await rescore_runs(rt, ["nomem"], "v", judge_model="m")
        with pytest.raises(BadInput, match="nothing to change"):
            await rescore_runs(rt, ["nomem"], "v")
        with pytest.raises(BadInput, match="not 'default'"):
            await rescore_runs(rt, ["nomem"], "default", judge_model="m")


async def test_another_judge_model_needs_an_endpoint(settings, fake):
    from dataclasses import replace
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("nomem",), users=1, tasks=1)
        await score_runs(rt, ["nomem"], ["dump_all"])
        rt.llm.settings = replace(rt.llm.settings, base_url=None)  # as with the embedded server
        with pytest.raises(BadInput, match="needs an endpoint"):
            await rescore_runs(rt, ["nomem"], "v", judge_model="m")
