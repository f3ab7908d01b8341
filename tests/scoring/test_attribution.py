"""Failure attribution: every label's path, the shared oracle, stage failures."""
from __future__ import annotations

import pytest

from memaudit.scoring.attribution import attribute_runs
from memaudit.scoring.recovery import score_runs
from memaudit.tables.paper import compute_tables
from tests.scoring.recorded import record, requests_for, runtime, script

pytestmark = pytest.mark.anyio


def slot(body) -> str:
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    marker = "Slot: " if "Slot: " in text else "- slot: "
    return text.split(marker, 1)[1].split("\n", 1)[0]


def scripted(fake):
    """skill_memory_dim_1 recovered; 2 task design; 3 memory; 4 agent; 5 simulator; 6 a broken stage."""
    script(fake)
    fake.on("recovery_judge", lambda b: {"score": 1.0 if slot(b) == "skill_memory_dim_1" else 0.0, "reason": "r"})
    fake.on("oracle", lambda b: {"can_invite": slot(b) != "skill_memory_dim_2", "reason": "oracle says"})
    fake.on("disclosure", lambda b: "{broken" if slot(b) == "skill_memory_dim_6" else
            {"disclosed": slot(b) == "skill_memory_dim_3", "evidence": "a quote", "reason": "disclosure says"})
    fake.on("elicitation", lambda b: {"category": "A" if slot(b) == "skill_memory_dim_4" else "B",
                                      "reason": "who stalled", "evidence": ""})
    return fake


EXPECTED = {"skill_memory_dim_1": "ok", "skill_memory_dim_2": "task_design_failure",
            "skill_memory_dim_3": "memory_failure", "skill_memory_dim_4": "agent_elicitation_failure",
            "skill_memory_dim_5": "simulator_too_strict", "skill_memory_dim_6": "unclassified"}


async def test_every_label_path_and_one_oracle_call_shared_by_systems_and_modes(settings, fake):
    scripted(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full", "nomem"), users=1, tasks=6)
        await score_runs(rt, ["longctx_full", "nomem"], ["dump_all", "retrieve"])
        await attribute_runs(rt, ["longctx_full", "nomem"], ["dump_all", "retrieve"])
        rows = {(a.run, a.mode, a.dimension): a for run in ("longctx_full", "nomem")
                for a in await rt.store.attributions.load(run)}
        oracle = await rt.store.fetchall("SELECT * FROM oracle")
    assert {(run, mode) for run, mode, _ in rows} == {("longctx_full", "dump_all"), ("longctx_full", "retrieve"),
                                                      ("nomem", "dump_all")}
    for (run, mode, dimension), a in rows.items():
        expected = EXPECTED.get(dimension, "no_targeted_task")
        if run == "nomem" and expected == "ok":  # an empty memory recovers nothing: the stages decide
            expected = "simulator_too_strict"
        assert a.label == expected, (run, mode, dimension)
    a = rows[("nomem", "dump_all", "skill_memory_dim_3")]
    assert [s["name"] for s in a.stages] == ["oracle", "disclosure"] and a.stages[1]["evidence"] == "a quote"
    assert a.ep_index == 3
    stalled = rows[("nomem", "dump_all", "skill_memory_dim_5")]
    assert [s["stage"] for s in stalled.stages] == [0, 1, 2] and stalled.stages[2]["reason"] == "who stalled"
    broken = rows[("nomem", "dump_all", "skill_memory_dim_6")]
    assert "invalid output from disclosure" in broken.note
    # Six targets below 0.75 have a task: one oracle call each, however many systems and modes.
    assert len(requests_for(fake, "oracle")) == 6 and len(oracle) == 6


async def test_overflow_and_failed_reconstructions(settings, fake):
    scripted(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=2)
        await score_runs(rt, ["longctx_full"], ["dump_all"], context_window=300)
        fake.on("recovery_judge", lambda b: {"score": 0.3, "reason": "off grid"})
        await score_runs(rt, ["longctx_full"], ["retrieve"])
        await attribute_runs(rt, ["longctx_full"], ["dump_all", "retrieve"])
        dump = await rt.store.attributions.load("longctx_full", "dump_all")
        retrieve = await rt.store.attributions.load("longctx_full", "retrieve")
    assert {a.label for a in dump} == {"overflow"} and len(dump) == 31
    assert {a.label for a in retrieve} == {"unclassified"}
    assert all(a.note.startswith("reconstruction failed") for a in retrieve)


async def test_overflow_targets_run_the_stages_and_table4_counts_them_as_published(settings, fake):
    """The published runner scored an overflowing store "unknown" -> 0 and ran the stages: Table 4
    keeps `overflow` and gives the published code's counts beside it."""
    scripted(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=6)
        await score_runs(rt, ["longctx_full"], ["dump_all"], context_window=300)
        await attribute_runs(rt, ["longctx_full"], ["dump_all"])
        dump = {a.dimension: a for a in await rt.store.attributions.load("longctx_full", "dump_all")}
        (row,) = [r for r in (await compute_tables(rt.store, bootstrap=0))["table4"] if r["mode"] == "dump_all"]
    assert {a.label for a in dump.values()} == {"overflow"}
    assert [s["name"] for s in dump["skill_memory_dim_5"].stages] == ["oracle", "disclosure", "elicitation"]
    published = row["published_equivalent"]
    assert row["overflow"] == 31 and "overflow" not in published
    assert published["task_design_failure"] == 1 and published["memory_failure"] == 1
    assert published["agent_elicitation_failure"] == 1 and published["simulator_too_strict"] == 2
    assert published["unclassified"] == 1 and published["no_targeted_task"] == 25
    assert published["recovery_rate"] == 0.0 and row["recovery_rate"] is None


async def test_failed_targets_run_the_stages_and_table4_counts_them_as_published(settings, fake):
    """The published runner scored a failed slot-fill or judge call 0 and ran the stages: memaudit
    keeps `unclassified` (T2) and counts the stages' labels in `published_equivalent`."""
    scripted(fake)
    fake.on("recovery_judge", lambda b: {"score": 0.3, "reason": "off grid"})  # every target fails
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=6)
        await score_runs(rt, ["longctx_full"], ["dump_all"])
        await attribute_runs(rt, ["longctx_full"], ["dump_all"])
        rows = {a.dimension: a for a in await rt.store.attributions.load("longctx_full", "dump_all")}
        (row,) = [r for r in (await compute_tables(rt.store, bootstrap=0))["table4"] if r["mode"] == "dump_all"]
        passes = await rt.store.attributions.passes("longctx_full")
    assert {a.label for a in rows.values()} == {"unclassified"}
    assert all(a.note.startswith("reconstruction failed") for a in rows.values())
    assert [s["name"] for s in rows["skill_memory_dim_5"].stages] == ["oracle", "disclosure", "elicitation"]
    assert row["unclassified"] == 31
    published = row["published_equivalent"]
    assert published["task_design_failure"] == 1 and published["memory_failure"] == 1
    assert published["agent_elicitation_failure"] == 1 and published["simulator_too_strict"] == 2
    assert published["unclassified"] == 1 and published["no_targeted_task"] == 25
    assert all(p["config"]["failed_stages"] is True for p in passes)


async def test_a_pass_recorded_before_failed_targets_ran_the_stages_replays_as_it_was_made(settings, fake):
    """An attribution pass without `failed_stages` (recorded before) is re-executed without stages for
    its failed targets: its calls are all in the cache, and the replay is identical."""
    from memaudit.replay import replay_runs
    scripted(fake)
    fake.on("recovery_judge", lambda b: {"score": 0.3, "reason": "off grid"})
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=3)
        await score_runs(rt, ["longctx_full"], ["dump_all"])
        await attribute_runs(rt, ["longctx_full"], ["dump_all"], failed_steps=False)
        rows = await rt.store.attributions.load("longctx_full", "dump_all")
        (recorded,) = await rt.store.attributions.passes("longctx_full")
    assert all(a.stages == [] for a in rows) and "failed_stages" not in recorded["config"]
    assert requests_for(fake, "oracle") == []
    assert await replay_runs(settings) is None


async def test_attribution_resumes(settings, fake):
    scripted(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("nomem",), users=1, tasks=6)
        await score_runs(rt, ["nomem"], ["dump_all"])
        await attribute_runs(rt, ["nomem"], ["dump_all"])
        before = len(fake.requests)
        await attribute_runs(rt, ["nomem"], ["dump_all"])
    assert len(fake.requests) == before


async def test_after_a_partial_rollout_entries_whose_task_never_ran_are_no_targeted_task(settings, fake):
    """3 of 31 tasks-worth of a user played, `--dims all`: the entries whose task never ran are
    not task design or unclassified failures; score says how many there were and what to do."""
    from memaudit.rollout.runner import run_rollout
    from tests.rollout.conftest import make_bench

    scripted(fake)
    bench = make_bench(n_users=1, n_tasks=6)
    async with runtime(settings, fake) as rt:
        await rt.store.benchmarks.save(bench)
        await run_rollout(rt, bench, ["nomem"], tasks=2, max_turns=2, progress=False)
        notes = await score_runs(rt, ["nomem"], ["dump_all"])
        await attribute_runs(rt, ["nomem"], ["dump_all"])
        labels = {a.dimension: a.label for a in await rt.store.attributions.load("nomem")}
    assert notes == ["nomem: 4 of 31 bank entries had no task played (a partial rollout): attribution labels them "
                     "no_targeted_task; `--dims targeted` scores only the entries whose task ran"]
    assert all(labels[f"skill_memory_dim_{i}"] == "no_targeted_task" for i in range(3, 7))
    assert {s for s in labels.values()} - {"no_targeted_task"} <= {"simulator_too_strict", "memory_failure",
                                                                  "task_design_failure"}
    assert len(requests_for(fake, "oracle")) == 2  # only the tasks that ran were asked about
