"""The runner: rows complete, several systems at once, resume after an interruption, config guard."""
from __future__ import annotations

import shutil

import anyio
import pytest

from memaudit.config import PROMPTS_DIR
from memaudit.errors import BadInput, EndpointError
from memaudit.provenance import PROTOCOL_VERSION, rollout_provenance
from memaudit.rollout import runner
from memaudit.rollout.runner import run_rollout, select_users

pytestmark = pytest.mark.anyio


class Interrupted(Exception):
    """Stands in for a kill between two episodes."""


def script(fake):
    fake
    # Replies depend on how much history the assistant saw, so a wrongly restored memory shows.
    fake.on_text(lambda body: f"A plan written after reading {len(body['messages'])} messages.")
    return fake


async def rows(store, run):
    out = {}
    for table in ("episodes", "turns", "snapshots"):
        out[table] = [tuple(r) for r in await store.fetchall(f"SELECT * FROM {table} WHERE run=? ORDER BY 2, 3, 4",
                                                              (run,))]
    return out


async def test_rollout_writes_complete_rows_for_every_system(open_rt, fake, bench):
    script(fake)
    async with open_rt() as rt:
        runs = await run_rollout(rt, bench, ["nomem", "longctx_full"], max_turns=3, progress=False)
        assert runs == ["nomem", "longctx_full"]
        for run in runs:
            episodes = await rt.store.episodes.load(run)
            assert len(episodes) == 6
            assert {e.end_reason for e in episodes} <= {"satisfied", "max_turns"}
            for e in episodes:
                assert 1 <= len(e.turns) <= 3
                assert (e.end_reason == "satisfied") == (e.turns[-1].feedback_type == "satisfied")
            row = await rt.store.fetchone("SELECT COUNT(*) AS n FROM snapshots WHERE run=?", (run,))
            assert row["n"] == 6
            uses = await rt.store.fetchone("SELECT COUNT(*) AS n FROM call_uses WHERE run=?", (run,))
            assert uses["n"] > 0
        final = await rt.store.fetchall("SELECT e.final_preference_score AS f, t.preference_score AS p FROM episodes e "
                                        "JOIN turns t ON t.run=e.run AND t.user_id=e.user_id AND t.task_idx=e.task_idx "
                                        "AND t.turn=e.n_turns")
        assert final and all(r["f"] == r["p"] for r in final)
        longctx = await rt.store.episodes.last_snapshot("longctx_full", "user_001")
        assert longctx["n_items"] > 0
        run = await rt.store.runs.get("nomem")
        assert run.config.to_json() == {"users": ["user_001", "user_002"], "tasks": None, "max_turns": 3, "k": 5,
                                         "tag": None, "provenance": rollout_provenance(rt.settings)}
        assert set(run.prompt_hashes) == {"agent", "simulator", "pref_judge"}


async def test_garbage_simulator_never_crashes_the_run(open_rt, fake, bench):
    script(fake).on("simulator", lambda body: "{broken")
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=2, progress=False)
        n = await rt.store.fetchone("SELECT COUNT(*) AS n, SUM(fallback) AS f FROM turns WHERE run='nomem'")
    assert n["n"] == 4 and n["f"] == 4


async def test_resume_after_interruption_matches_an_uninterrupted_run(settings, fake, bench, open_rt, tmp_path,
                                                                      monkeypatch):
    from dataclasses import replace
    script(fake)
    async with open_rt(replace(settings, db=tmp_path / "whole.db")) as rt:
        await run_rollout(rt, bench, ["longctx_full"], max_turns=3, progress=False)
        whole = await rows(rt.store, "longctx_full")

    # The second store's run is interrupted after its third committed episode.
    real_commit, commits = runner.commit_episode, []

    async def commit_then_die(store, ep, adapter, uses):
        await real_commit(store, ep, adapter, uses)
        commits.append(ep)
        if len(commits) == 3:
            raise Interrupted

    partial_settings = replace(settings, db=tmp_path / "partial.db")
    monkeypatch.setattr(runner, "commit_episode", commit_then_die)
    with pytest.raises(Interrupted):
        async with open_rt(partial_settings) as rt:
            await run_rollout(rt, bench, ["longctx_full"], max_turns=3, progress=False)
    monkeypatch.setattr(runner, "commit_episode", real_commit)
    async with open_rt(partial_settings) as rt:
        done = await rt.store.fetchone("SELECT COUNT(*) AS n FROM episodes")
        assert 3 <= done["n"] < 6
        await run_rollout(rt, bench, ["longctx_full"], max_turns=3, progress=False)
        assert await rows(rt.store, "longctx_full") == whole


async def test_a_different_config_for_an_existing_run_asks_for_a_tag(open_rt, fake, bench):
    script(fake)
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=2, progress=False)
        with pytest.raises(BadInput, match="--tag"):
            await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=3, progress=False)
        assert await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=3, tag="t3", progress=False) == ["nomem_t3"]


async def test_a_resume_with_another_model_protocol_or_prompt_is_refused(open_rt, fake, bench, settings, tmp_path,
                                                                        monkeypatch):
    from dataclasses import replace
    script(fake)
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=2, progress=False)
        config = (await rt.store.runs.get("nomem")).config.to_json()
    assert config["provenance"]["protocol"] == PROTOCOL_VERSION
    assert config["provenance"]["roles"]["agent"] == {"model": "fake-model", "backend": "openai", "temperature": 0.7,
                                                      "top_p": None, "max_tokens": None, "reasoning_effort": None,
                                                      "context_window": None}
    async with open_rt(replace(settings, model="another-model")) as rt:
        with pytest.raises(BadInput, match=r"different agent model \(recorded 'fake-model', now 'another-model'\)"
                                           r".*--tag"):
            await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=2, progress=False)
    monkeypatch.setattr(runner, "rollout_provenance", lambda s: {**rollout_provenance(s), "protocol": "0"})
    async with open_rt() as rt:
        with pytest.raises(BadInput, match="different protocol"):
            await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=2, progress=False)
    monkeypatch.undo()
    prompts = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR, prompts)
    (prompts / "agent.md").write_text((prompts / "agent.md").read_text() + "\nBe kind.\n")
    async with open_rt(replace(settings, prompts_dir=prompts)) as rt:
        with pytest.raises(BadInput, match="different prompt agent"):
            await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=2, progress=False)


def test_provenance_records_what_a_reasoning_model_is_sent(settings):
    """The dialect's rules apply to what provenance records: the published temperatures for gpt-5
    (never dropped for a name), and the reasoning budget in place of no cap, as each call's key holds."""
    from dataclasses import replace
    from memaudit.llm.dialects import REASONING_BUDGET
    roles = rollout_provenance(replace(settings, model="gpt-5.4-mini"))["roles"]
    assert roles["agent"]["temperature"] == 0.7 and roles["simulator"]["temperature"] == 0.85
    assert roles["agent"]["max_tokens"] == REASONING_BUDGET
    assert rollout_provenance(settings)["roles"]["simulator"]["temperature"] == 0.85


async def test_unknown_system_or_user_is_bad_input_before_any_write(open_rt, fake, bench):
    async with open_rt() as rt:
        with pytest.raises(BadInput, match="unknown memory system"):
            await run_rollout(rt, bench, ["nomem", "nosuch"], progress=False)
        with pytest.raises(BadInput, match="user_009"):
            await run_rollout(rt, bench, ["nomem"], users=["user_009"], progress=False)
        assert await rt.store.runs.list() == []


async def test_unreachable_endpoint_aborts_without_half_episodes(open_rt, fake, bench, settings):
    from dataclasses import replace
    fake.faults = [503] * 100
    async with open_rt(replace(settings, max_retries=1)) as rt:
        with pytest.raises(EndpointError):
            await run_rollout(rt, bench, ["nomem"], max_turns=2, progress=False)
        assert (await rt.store.fetchone("SELECT COUNT(*) AS n FROM turns"))["n"] == 0


async def test_users_run_concurrently(open_rt, fake, settings):
    from tests.rollout.conftest import make_bench
    script(fake).on("simulator", lambda body: {"feedback_type": "satisfied", "text": "done"})
    fake.latency = 0.05
    bench = make_bench(n_users=4, n_tasks=2)
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["nomem"], progress=False)
    # Each user's calls are sequential, so more than one request in flight means users overlapped
    # (no wall-clock assertion: timing figures live in perf/rollout.py).
    assert fake.peak_in_flight > 1


def test_select_users(bench):
    assert select_users(bench, "1") == ["user_001"]
    assert select_users(bench, "user_002, user_001") == ["user_002", "user_001"]
    assert select_users(bench, None) is None
    with pytest.raises(BadInput):
        select_users(bench, "0")
