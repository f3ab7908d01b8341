"""Replay: a recorded rollout, scoring (both modes, a rescoring variant) and attribution are
re-executed from the cache alone and compared artifact by artifact."""
from __future__ import annotations

import anyio
import pytest

from memaudit.cli import main
from memaudit.errors import CacheMiss
from memaudit.replay import replay_runs
from memaudit.scoring.attribution import attribute_runs
from memaudit.scoring.recovery import score_runs
from memaudit.scoring.rescore import rescore_runs
from memaudit.store import open_store
from tests.scoring.recorded import record, runtime, script

FLAGS = ["--base-url", "http://fake.test/v1", "--model", "fake-model", "--backend", "openai"]


async def tamper(settings, sql: str) -> None:
    async with open_store(settings.db) as store:
        await store.write([(sql, ())])


async def recorded(settings, fake):
    script(fake)
    async with runtime(settings, fake) as rt:
        runs = await record(rt, ("longctx_full", "nomem"), users=1, tasks=2)
        await score_runs(rt, runs, ["dump_all", "retrieve"], ks=(2, 5))
        await rescore_runs(rt, runs, "judge2", judge_model="judge-2")
        await attribute_runs(rt, runs, ["dump_all", "retrieve"])
    return runs


@pytest.mark.anyio
async def test_replay_is_identical_after_a_recorded_run(settings, fake):
    await recorded(settings, fake)
    requests = len(fake.requests)
    assert await replay_runs(settings) is None
    assert await replay_runs(settings, ["nomem"]) is None
    assert len(fake.requests) == requests  # no model was contacted


@pytest.mark.anyio
async def test_replay_reports_a_tampered_row(settings, fake):
    await recorded(settings, fake)
    await tamper(settings, "UPDATE reconstructions SET label='tampered' WHERE run='nomem' AND mode='dump_all' "
                           "AND user_id='user_001' AND dimension='self_model_dim_1'")
    found = await replay_runs(settings)
    assert found.startswith("reconstructions ") and "'self_model_dim_1'" in found
    assert "column label: recorded 'tampered' vs replayed" in found


@pytest.mark.anyio
async def test_replay_of_passes_recorded_before_machine_notes_is_identical(settings, fake):
    """A pass scored by earlier code records neither how prompts are measured against the window
    (`overflow_count`, which names this machine's tokenizer) nor the roles' repair attempts: neither
    is an input of a number, so replay is identical; a changed input is named field by field."""
    await recorded(settings, fake)
    await tamper(settings, "UPDATE score_passes SET config = json_set(json_remove(config, '$.overflow_count'), "
                           "'$.provenance.roles.slot_fill.repair_attempts', 7)")
    assert await replay_runs(settings) is None
    await tamper(settings, "UPDATE score_passes SET config = json_set(config, '$.provenance.seed', 99) "
                           "WHERE run='nomem' AND mode='dump_all'")
    found = await replay_runs(settings)
    assert found.startswith("score_passes ") and found.endswith("column config: seed (recorded 99, replayed None)")


@pytest.mark.anyio
async def test_replay_without_the_calls_is_a_cache_miss_naming_the_role(settings, fake):
    await recorded(settings, fake)
    await tamper(settings, "DELETE FROM calls WHERE role='recovery_judge'")
    with pytest.raises(CacheMiss, match="cache miss for role recovery_judge"):
        await replay_runs(settings)


def test_replay_command_prints_identical_or_the_difference(settings, fake, capsys):
    # The command runs its own event loop (and signal handlers): a plain test in the main thread.
    anyio.run(recorded, settings, fake)
    main(["--db", str(settings.db), *FLAGS, "replay"])
    assert capsys.readouterr().out.strip() == "identical"
    anyio.run(tamper, settings, "UPDATE turns SET user_text='edited' WHERE run='longctx_full' AND turn=1")
    with pytest.raises(SystemExit) as exit_info:
        main(["--db", str(settings.db), *FLAGS, "replay", "--runs", "longctx_full"])
    assert exit_info.value.code == 1
    assert capsys.readouterr().out.startswith("turns {'run': 'longctx_full'")


def test_replay_takes_the_model_settings_from_the_recorded_runs(tmp_path, capsys):
    """The acceptance case: a run against a loopback server given by flags, then a bare `replay`
    with the server stopped prints identical (the settings come from the runs' provenance)."""
    from memaudit.testing import FakeOpenAI, serve
    from tests.rollout.conftest import make_bench

    db = tmp_path / "s.db"

    async def bench():
        async with open_store(db) as store:
            await store.benchmarks.save(make_bench(n_users=1, n_tasks=2))
    anyio.run(bench)
    with serve(script(FakeOpenAI())) as url:
        flags = ["--db", str(db), "--base-url", url, "--model", "served-model"]
        main(["rollout", "--bench", "tiny", "--systems", "longctx_full", "--max-turns", "2", "--quiet", *flags])
        main(["score", "--mode", "dump_all", *flags])
    capsys.readouterr()
    main(["replay", "--db", str(db)])  # no model flags; the server is gone
    out, err = capsys.readouterr()
    assert out.strip() == "identical"
    assert "compared 1 run(s) (longctx_full):" in err and "episodes" in err and "reconstructions" in err


def test_replay_over_imported_runs_only_refuses_to_claim_identical(tmp_path, capsys):
    from memaudit.release import import_release
    from memaudit.testing.release_fixture import write_release

    root = write_release(tmp_path / "pub", users=1, runs=("nomem_pooled_50",), turns=2)
    db = tmp_path / "s.db"

    async def imported():
        async with open_store(db) as store:
            await import_release(store, root)
    anyio.run(imported)
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", "--db", str(db)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "nothing to replay" in err and "1 imported run(s)" in err


def test_a_killed_replays_scratch_folder_is_removed_by_the_next(settings, fake, tmp_path):
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from memaudit.replay import SCRATCH_PREFIX

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = Path(tempfile.gettempdir()) / f"{SCRATCH_PREFIX}{int(gone.stdout)}-killed"
    stale.mkdir()
    (stale / "replay.db").write_bytes(b"x" * 1000)
    anyio.run(recorded, settings, fake)
    assert anyio.run(replay_runs, settings) is None
    assert not stale.exists()


def test_replay_rebuilds_a_configured_embedding_endpoint_from_the_runs(tmp_path, capsys):
    """A rollout whose memory embeds through an `/v1/embeddings` endpoint (a `[roles.memory]`
    section), scored in both modes; a bare `replay` with the server stopped and no config prints
    identical: the run recorded its embedding model (not the URL, nor the key) and replay reads the
    vectors from the store under it."""
    from memaudit.testing import FakeOpenAI, serve
    from tests.rollout.conftest import make_bench

    db, config = tmp_path / "s.db", tmp_path / "embed.toml"

    async def bench():
        async with open_store(db) as store:
            await store.benchmarks.save(make_bench(n_users=1, n_tasks=2))
    anyio.run(bench)
    fake = script(FakeOpenAI())
    with serve(fake) as url:
        config.write_text(f'[roles.memory]\nembed_model = "fake-embed"\nembed_base_url = "{url}"\n')
        flags = ["--db", str(db), "--base-url", url, "--model", "served-model", "--config", str(config)]
        main(["rollout", "--bench", "tiny", "--systems", "simple_rag", "--max-turns", "2", "--quiet", *flags])
        main(["score", "--mode", "both", *flags])
    assert {body["model"] for body in fake.embedding_requests} == {"fake-embed"}

    async def recorded_run():
        async with open_store(db) as store:
            return (await store.runs.get("simple_rag")).config.provenance["embeddings"]
    assert anyio.run(recorded_run) == {"memory": {"model": "fake-embed", "endpoint": True}}
    capsys.readouterr()
    main(["replay", "--db", str(db)])  # no flags, no config; the server is gone
    out, err = capsys.readouterr()
    assert out.strip() == "identical" and "compared 1 run(s) (simple_rag):" in err
