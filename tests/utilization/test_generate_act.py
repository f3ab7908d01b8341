"""`generate-act`: a scenario per bank entry through the generator role, reviewed by the task
critic (an editor rewrite while it says fishing), stored, resumable, and written in the layout
that the sample's bundled scenarios use."""
from __future__ import annotations

import pytest

from memaudit.bench.act import load_act_scenarios, read_act_dir
from memaudit.bench.act_generate import generate_act
from memaudit.bench.instances import SAMPLE_DIR, load_release_benchmark, resolve_act_scenarios, _sample_pool
from tests.rollout.conftest import make_bench
from tests.scoring.recorded import requests_for, runtime


def drafts(body) -> dict:
    return {"task": "I need help planning a weekend. What should I do?", "rationale": "r", "scene": "hobbies"}


@pytest.mark.anyio
async def test_scenarios_are_written_reviewed_stored_and_resumed(settings, fake, tmp_path):
    verdicts = iter(["fishing"] + ["neutral"] * 200)
    fake.on("act_scenario", drafts)
    fake.on("critic", lambda body: {"guessed_trait": "t", "verdict": next(verdicts), "reason": "r"})
    fake.on("editor", lambda body: {"task": "My sister is visiting. What should we do on Saturday?", "rationale": "e"})
    bench = make_bench(n_users=1, n_tasks=3)
    async with runtime(settings, fake) as rt:
        await rt.store.benchmarks.save(bench)
        report = await generate_act(rt, bench, out_dir=tmp_path / "out")
        assert report.written == 31 and not report.failures
        stored = await load_act_scenarios(rt.store, "tiny")
        again = await generate_act(rt, bench)
    assert again.kept == 31 and again.written == 0
    assert len(requests_for(fake, "act_scenario")) == 31 and len(requests_for(fake, "critic")) == 32
    edited = [s for s in stored["user_001"].values() if s.review.get("revisions")]
    assert len(edited) == 1 and edited[0].text.startswith("My sister")
    assert edited[0].review["critic_verdicts"][0]["verdict"] == "fishing"
    written = read_act_dir(tmp_path / "out", bench)
    assert {s.dimension: s.text for s in written["user_001"]} == {d: s.text for d, s in stored["user_001"].items()}


@pytest.mark.anyio
async def test_the_bundled_sample_ships_one_scenario_per_entry(settings, fake):
    bench = load_release_benchmark(SAMPLE_DIR, name="sample", pool_path=_sample_pool())
    async with runtime(settings, fake) as rt:
        await rt.store.benchmarks.save(bench)
        found = await resolve_act_scenarios(rt.store, bench)
    assert sum(len(v) for v in found.values()) == 93
    for user in bench.users:
        assert set(found[user.id]) == {e.dimension for e in user.bank}
        for entry in user.bank:
            text = found[user.id][entry.dimension].text.lower()
            assert entry.dimension.replace("_", " ") not in text and entry.short.lower() not in text
