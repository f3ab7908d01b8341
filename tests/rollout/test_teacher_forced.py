"""Teacher-forced rollout: memory systems fed the recorded transcripts of a run, in the live order,
with no assistant, simulator or preference-judge call."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import fields, replace

import anyio
import orjson
import pytest

from memaudit.errors import BadInput
from memaudit.provenance import PROTOCOL_VERSION
from memaudit.release import export_runs, import_release
from memaudit.replay import replay_runs
from memaudit.rollout import runner
from memaudit.rollout.runner import run_rollout
from memaudit.scoring.recovery import ready_users
from memaudit.store import RunBusy, loads, open_store
from memaudit.store.episodes import TurnRow
from memaudit.testing.fake_openai import schema_name
from memaudit.testing.release_fixture import write_release
from tests.rollout.conftest import make_bench
from tests.scoring.recorded import record, runtime
from tests.scoring.recorded import script as recorded_script

pytestmark = pytest.mark.anyio


def simulator_by_turn(body: dict) -> object:
    """A user who asks for more, once answers with garbage (a recorded fallback), then is satisfied
    on the third reply; every message names its conversation, so items are distinct."""
    conversation = next(m["content"] for m in body["messages"] if m["role"] == "user")  # also when repaired
    replies = conversation.count("Assistant: ")
    if replies == 2 and "chore 2" in conversation:
        return "{broken"
    done = replies >= 3
    return {"feedback_type": "satisfied" if done else "followup",
            "text": f"message {replies} of a conversation {len(conversation)} long"}


def script(fake):
    fake.on("simulator", simulator_by_turn)
    fake.on_text(lambda body: f"A plan written after reading {len(str(body['messages']))} characters.")
    return fake


def without_ids(items: list[dict]) -> list[dict]:
    """Item ids come from the run's own scope; everything else must match."""
    return [{k: v for k, v in item.items() if k != "id"} for item in items]


async def snapshots(store, run: str) -> dict:
    rows = await store.fetchall("SELECT user_id, task_idx, items FROM snapshots WHERE run=? ORDER BY 1, 2", (run,))
    return {(r["user_id"], r["task_idx"]): without_ids(loads(r["items"])) for r in rows}


async def transcript_rows(store, run: str) -> dict:
    out = {}
    for table in ("episodes", "turns"):
        rows = await store.fetchall(f"SELECT * FROM {table} WHERE run=? ORDER BY 2, 3, 4", (run,))
        out[table] = [tuple(r)[1:] for r in rows]  # all but the run column
    return out


async def test_longctx_full_over_its_own_recorded_run_stores_the_same_items_with_no_dialogue_call(
        open_rt, fake, bench):
    script(fake)
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["longctx_full"], max_turns=3, progress=False)
        fake.requests.clear()
        runs = await run_rollout(rt, bench, ["longctx_full"], transcripts="longctx_full", progress=False)
        assert runs == ["longctx_full_tf_longctx_full"]
        assert fake.requests == []  # longctx_full makes no model call of its own
        source, forced = await snapshots(rt.store, "longctx_full"), await snapshots(rt.store, runs[0])
        forced_rows = await transcript_rows(rt.store, runs[0])
        assert forced_rows == await transcript_rows(rt.store, "longctx_full")
        run = await rt.store.runs.get(runs[0])
    assert len(source) == 6 and forced.keys() == source.keys()
    for key in source:  # after every episode, item for item: task, user and (same order as live) agent items
        assert forced[key] == source[key], key
    assert {i["category"] for i in forced[("user_002", 3)]} == {"task", "agent_reply", "user_reply"}
    fallback = [f.name for f in fields(TurnRow)].index("fallback") - 1  # transcript_rows drops the run column
    fallbacks = [r for r in forced_rows["turns"] if r[fallback]]
    assert fallbacks  # a placeholder is part of the transcript, never of memory
    assert all("[no valid simulator reply]" not in i["content"] for items in forced.values() for i in items)
    assert run.config.tag == "tf_longctx_full" and run.prompt_hashes == {}
    provenance = run.config.provenance
    assert provenance["protocol"] == PROTOCOL_VERSION
    assert set(provenance["roles"]) == {"memory", "memt_policy"}  # the dialogue roles are not called
    assert run.config.transcripts == "longctx_full"  # RunConfig.transcripts: the teacher-forced marker
    assert provenance["teacher_forced"]["episodes"]  # a digest of the episodes replayed


async def test_a_system_with_model_calls_only_calls_its_memory_role(open_rt, fake, bench):
    script(fake)
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["longctx_full"], users=["user_001"], tasks=2, max_turns=3, progress=False)
        fake.requests.clear()
        [run] = await run_rollout(rt, bench, ["amem"], transcripts="longctx_full", tag="tf", progress=False)
        roles = {r["role"] for r in await rt.store.fetchall("SELECT DISTINCT role FROM call_uses WHERE run=?", (run,))}
        forced = await transcript_rows(rt.store, run)
        assert forced == await transcript_rows(rt.store, "longctx_full")
        snapshot = await rt.store.episodes.last_snapshot(run, "user_001")
    assert run == "amem_tf"
    assert fake.requests and all((schema_name(r) or "").startswith("memory") for r in fake.requests)
    assert roles and all(role.startswith("memory:") for role in roles)
    assert snapshot["task_idx"] == 2 and snapshot["n_items"] > 0


async def test_users_and_tasks_select_among_the_recorded_episodes(open_rt, fake, bench):
    script(fake)
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["nomem"], tasks=2, max_turns=2, progress=False)
        [run] = await run_rollout(rt, bench, ["longctx_full"], transcripts="nomem", users=["user_002"], tasks=1,
                                  progress=False)
        episodes = await rt.store.episodes.load(run)
        config = (await rt.store.runs.get(run)).config.to_json()
        [whole] = await run_rollout(rt, bench, ["bm25"], transcripts="nomem", progress=False)
        whole_config = (await rt.store.runs.get(whole)).config.to_json()
    assert [(e.user_id, e.task_index) for e in episodes] == [("user_002", 1)]
    assert config["users"] == ["user_002"] and config["tasks"] == 1 and config["max_turns"] == 2
    assert whole_config["users"] == ["user_001", "user_002"] and whole_config["tasks"] == 2  # the source's


@contextmanager
def killed_after(monkeypatch, episodes: int):
    """Within the block, the runner commits `episodes` episodes, then dies as a kill would.

    Users run in parallel: a commit counts once it has completed, and the kill waits for the
    commits already under way, so another user's kill can never cancel one of the first
    `episodes` half-way (which made the count depend on scheduling)."""
    real_commit, started, finished = runner.commit_episode, [], []
    all_finished = anyio.Event()

    async def commit_then_die(store, ep, adapter, uses):
        if len(started) == episodes:
            await all_finished.wait()
            raise RuntimeError("killed")
        started.append(ep.task_index)
        try:
            await real_commit(store, ep, adapter, uses)
        finally:
            finished.append(ep.task_index)
            if len(finished) == episodes:
                all_finished.set()
    monkeypatch.setattr(runner, "commit_episode", commit_then_die)
    try:
        yield
    finally:
        monkeypatch.setattr(runner, "commit_episode", real_commit)


async def test_resume_continues_where_it_stopped_and_matches_an_uninterrupted_run(
        settings, fake, bench, open_rt, tmp_path, monkeypatch):
    """amem's writes depend on model calls seeded by its run: the same run id in two stores."""
    script(fake)
    found = {}
    for name in ("whole", "resumed"):
        async with open_rt(replace(settings, db=tmp_path / f"{name}.db")) as rt:
            await run_rollout(rt, bench, ["longctx_full"], max_turns=3, progress=False)
            if name == "resumed":
                with killed_after(monkeypatch, 4), pytest.raises(RuntimeError, match="killed"):
                    await run_rollout(rt, bench, ["amem"], transcripts="longctx_full", progress=False)
                assert len(await rt.store.episodes.load("amem_tf_longctx_full")) == 4
            await run_rollout(rt, bench, ["amem"], transcripts="longctx_full", progress=False)
            found[name] = (await rt.store.fetchall("SELECT * FROM snapshots WHERE run='amem_tf_longctx_full' "
                                                   "ORDER BY 2, 3"),
                           await transcript_rows(rt.store, "amem_tf_longctx_full"))
    assert [tuple(r) for r in found["resumed"][0]] == [tuple(r) for r in found["whole"][0]]
    assert found["resumed"][1] == found["whole"][1]


async def test_a_resume_over_another_or_a_changed_source_is_refused(open_rt, fake, bench):
    script(fake)
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["longctx_full", "nomem"], tasks=1, max_turns=2, progress=False)
        await run_rollout(rt, bench, ["bm25"], transcripts="longctx_full", tag="x", progress=False)
        with pytest.raises(BadInput, match="different teacher_forced"):
            await run_rollout(rt, bench, ["bm25"], transcripts="nomem", tag="x", progress=False)
        with pytest.raises(BadInput, match="was made with a different .*--tag"):  # the same run id, played live
            await run_rollout(rt, bench, ["bm25"], tasks=1, max_turns=2, tag="x", progress=False)
        await rt.store.write([("UPDATE turns SET user_text='edited' WHERE run='longctx_full' AND turn=1", ())])
        with pytest.raises(BadInput, match="teacher_forced episodes"):
            await run_rollout(rt, bench, ["bm25"], transcripts="longctx_full", tag="x", progress=False)


async def test_bad_sources_are_named(open_rt, fake, bench):
    script(fake)
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["nomem"], users=["user_001"], tasks=1, max_turns=2, progress=False)
        with pytest.raises(BadInput, match="no run 'nosuch'"):
            await run_rollout(rt, bench, ["nomem"], transcripts="nosuch", progress=False)
        with pytest.raises(BadInput, match="user user_002.*no episodes"):
            await run_rollout(rt, bench, ["nomem"], transcripts="nomem", users=["user_002"], progress=False)
        with pytest.raises(BadInput, match="recorded on benchmark 'tiny', not 'other'"):
            await run_rollout(rt, make_bench(name="other"), ["nomem"], transcripts="nomem", progress=False)
        [forced] = await run_rollout(rt, bench, ["bm25"], transcripts="nomem", progress=False)
        with pytest.raises(BadInput, match="itself teacher-forced on the transcripts of 'nomem'"):
            await run_rollout(rt, bench, ["nomem"], transcripts=forced, progress=False)


async def test_the_published_longctx_full_stores_are_reproduced_from_their_transcripts(
        tmp_path, settings, fake, open_rt):
    """Task and user items equal the published store's, same contents in the same order, for every
    user; agent items differ by exactly the final reply of each episode, which the published runner
    never stored (docs/fidelity.md, Teacher-forced runs)."""
    root = write_release(tmp_path / "pub", users=3, runs=("longctx_full_pooled_50",), turns=3,
                         transcript_stores=True)
    async with open_rt() as rt:
        await import_release(rt.store, root)
        bench = await rt.store.benchmarks.load("pub")
        [run] = await run_rollout(rt, bench, ["longctx_full"], transcripts="longctx_full_pooled_50", progress=False)
        assert fake.requests == []
        finals = {u.id: (await rt.store.episodes.last_snapshot(run, u.id))["items"] for u in bench.users}
        await export_runs(rt.store, [run], tmp_path / "out")
    for path in sorted((root / "history/longctx_full_pooled_50").glob("*/episode_*.json")):
        exported = orjson.loads((tmp_path / "out/history" / run / path.parent.name / path.name).read_bytes())
        published = orjson.loads(path.read_bytes())
        assert [(t["agent_response"], t["user_simulator"]["text"], t["user_simulator"]["feedback_type"],
                 t["preference_evaluator"]["score"]) for t in exported["turns"]] == \
            [(t["agent_response"], t["user_simulator"]["text"], t["user_simulator"]["feedback_type"],
              t["preference_evaluator"]["score"]) for t in published["turns"]], path
        assert (exported["task"], exported["end_reason"]) == (published["task"], published["end_reason"])
    for user, ours in finals.items():
        published = orjson.loads((root / f"memory/longctx_full_pooled_50/{user}/memories.json").read_bytes())["memories"]
        theirs = [m for m in published if m["category"] in ("task", "user_reply")]
        mine = [i for i in ours if i["category"] in ("task", "user_reply")]
        assert len(mine) == len(theirs) > 31  # every task and at least one user message per episode
        assert [{k: item[k] for k in m} for item, m in zip(mine, theirs)] == theirs, user  # the published fields
        turns = {e: max(i["turn"] for i in ours if i["task_index"] == e) for e in range(1, 32)}
        agent_but_final = [{k: i[k] for k in ("content", "category", "task_index", "turn")} for i in ours
                           if i["category"] == "agent_reply" and i["turn"] < turns[i["task_index"]]]
        assert agent_but_final == [m for m in published if m["category"] == "agent_reply"], user


async def test_replay_reproduces_a_teacher_forced_run_with_or_without_its_source(settings, fake):
    recorded_script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=2, tasks=2)
        bench = await rt.store.benchmarks.load("tiny")
        await run_rollout(rt, bench, ["amem", "longctx_full"], transcripts="longctx_full", progress=False)
    requests = len(fake.requests)
    assert await replay_runs(settings) is None
    assert await replay_runs(settings, ["amem_tf_longctx_full"]) is None  # the source copied, not re-run
    assert len(fake.requests) == requests


async def test_replay_of_a_teacher_forced_run_over_an_imported_release(tmp_path, settings, fake):
    root = write_release(tmp_path / "pub", users=2, runs=("longctx_full_pooled_50",), turns=2,
                         transcript_stores=True)
    async with runtime(settings, fake) as rt:
        await import_release(rt.store, root)
        bench = await rt.store.benchmarks.load("pub")
        await run_rollout(rt, bench, ["longctx_full"], transcripts="longctx_full_pooled_50", tasks=3, progress=False)
    assert await replay_runs(settings) is None


async def test_a_stopped_source_plans_only_its_recorded_episodes(open_rt, fake, bench, monkeypatch):
    """Scoring readiness: a teacher-forced run is complete once it replayed every episode its source
    recorded, though the source itself stopped short of its plan."""
    script(fake)
    async with open_rt() as rt:
        with killed_after(monkeypatch, 4), pytest.raises(RuntimeError, match="killed"):
            await run_rollout(rt, bench, ["longctx_full"], max_turns=2, progress=False)
        [forced] = await run_rollout(rt, bench, ["bm25"], transcripts="longctx_full", progress=False)
        recorded = {u.id: await rt.store.episodes.done("longctx_full", u.id) for u in bench.users}
        _, source_skipped = await ready_users(rt.store, await rt.store.runs.require("longctx_full"), bench)
        ready, skipped = await ready_users(rt.store, await rt.store.runs.require(forced), bench)
    assert source_skipped  # the source's own plan was every task
    assert skipped == [] and {r.user.id: r.done for r in ready} == {u: done for u, done in recorded.items() if done}


async def test_a_source_that_a_rollout_is_writing_is_refused_as_busy(open_rt, fake, bench, settings):
    script(fake)
    async with open_rt() as rt:
        await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=2, progress=False)
        async with open_store(settings.db) as other:
            with other.runs.lock("nomem"):  # another process is resuming the source
                with pytest.raises(RunBusy, match="run 'nomem' is busy"):
                    await run_rollout(rt, bench, ["bm25"], transcripts="nomem", progress=False)
        assert await rt.store.runs.get("bm25_tf_nomem") is None
        assert await run_rollout(rt, bench, ["bm25"], transcripts="nomem", progress=False) == ["bm25_tf_nomem"]
