"""import-release from the published layout, and export back into it."""
from __future__ import annotations

import hashlib

import orjson
import pytest

from memaudit.errors import BadInput
from memaudit.llm.keys import text_hash
from memaudit.release import export_runs, import_release
from memaudit.store import open_store
from memaudit.testing.release_fixture import write_release

RUNS = ("amem_pooled_50", "memt_memonly_pooled_50", "nomem_pooled_50")
pytestmark = pytest.mark.anyio


async def _table_counts(store):
    tables = ("benchmarks", "users", "tasks", "runs", "episodes", "turns", "snapshots", "reconstructions",
              "attributions", "oracle")
    return {t: (await store.fetchone(f"SELECT COUNT(*) AS n FROM {t}"))["n"] for t in tables}


async def test_import_release_reads_every_raw_record(tmp_path):
    root = write_release(tmp_path / "pub", users=2, runs=RUNS, turns=3)
    async with open_store(tmp_path / "s.db") as store:
        assert await import_release(store, root) == sorted(RUNS)
        run = await store.runs.get("memt_memonly_pooled_50")
        assert (run.system, run.bench, run.origin) == ("memt", "pub", "import")
        assert run.config.users == ["user_001", "user_002"]
        counts = await _table_counts(store)
        assert counts["episodes"] == 3 * 2 * 31 and counts["snapshots"] == 3 * 2
        assert counts["reconstructions"] == (3 + 2) * 2 * 31  # nomem has no retrieve report
        assert counts["attributions"] == counts["reconstructions"] and counts["oracle"] == 2 * 31

        episode = orjson.loads((root / "history/amem_pooled_50/user_002/episode_7.json").read_bytes())
        [loaded] = [e for e in await store.episodes.load("amem_pooled_50", "user_002") if e.task_index == 7]
        assert loaded.end_reason == episode["end_reason"] and len(loaded.turns) == len(episode["turns"])
        assert [t.preference_score for t in loaded.turns] == [t["preference_evaluator"]["score"] for t in episode["turns"]]
        assert loaded.turns[0].per_pref == [{"idx": 0, "score": 4}]

        snap = await store.episodes.last_snapshot("amem_pooled_50", "user_001")
        assert snap["task_idx"] == 31 and snap["n_items"] == 3 and snap["avg_chars"] == 60

        recon = orjson.loads((root / "output/amem_pooled_50_retrieve/recon_judge/user_001.json").read_bytes())
        loaded = await store.scores.load("amem_pooled_50", "retrieve", user_id="user_001")
        assert {r.k for r in loaded} == {5} and {r.status for r in loaded} == {"ok"}
        by_dim = {r.dimension: r for r in loaded}
        for d in recon["details"]:
            assert by_dim[d["dimension"]].score == d["score"] and by_dim[d["dimension"]].label == d["predicted"]
        assert by_dim["skill_axis_0"].evidence["items"][0]["id"] == "m0"
        dump = await store.scores.load("amem_pooled_50", "dump_all", user_id="user_001")
        assert {r.k for r in dump} == {0} and dump[0].evidence == {"n_items": 3, "chars": 180}

        labels = {a.label for a in await store.attributions.load("amem_pooled_50")}
        assert labels <= {"ok", "memory_failure"}
        bench = await store.benchmarks.load("pub")
        task = bench.tasks["user_001"][0]
        row = await store.fetchone("SELECT can_invite FROM oracle WHERE user_id='user_001' AND dimension=? AND task_hash=?",
                                   (task.target_dimension, text_hash(task.text)))
        assert row["can_invite"] == 0  # the fixture's task 1 of every fifth is false


def _duplicate_first_detail(path):
    data = orjson.loads(path.read_bytes())
    data["details"].append(data["details"][0])
    path.write_bytes(orjson.dumps(data))


@pytest.mark.parametrize("damage, named", [
    (lambda r: (r / "history/amem_pooled_50/user_002/episode_5.json").write_text('{"user_id": "user_0'),
     "history/amem_pooled_50/user_002/episode_5.json"),
    (lambda r: (r / "memory/nomem_pooled_50/user_001/memories.json").write_text("[]"),
     "memory/nomem_pooled_50/user_001/memories.json"),
    (lambda r: (r / "output/amem_pooled_50_retrieve/attribution/user_002.json").write_text('{"details": [{}]}'),
     "output/amem_pooled_50_retrieve/attribution/user_002.json"),
    (lambda r: (r / "history/amem_pooled_50/user_009").mkdir(), "user_009"),
    (lambda r: _duplicate_first_detail(r / "output/amem_pooled_50/recon_judge/user_001.json"),
     "output/amem_pooled_50/recon_judge/user_001.json"),
    (lambda r: (r / "benchmark_data/CustomTasksPooledFinal/user_001.json").unlink(), "user_001"),
])
async def test_a_damaged_file_is_named_and_nothing_is_written(tmp_path, damage, named):
    root = write_release(tmp_path / "pub", users=2, runs=("amem_pooled_50", "nomem_pooled_50"))
    damage(root)
    async with open_store(tmp_path / "s.db") as store:
        before = await _table_counts(store)
        with pytest.raises(BadInput, match=named):
            await import_release(store, root)
        assert await _table_counts(store) == before


async def test_importing_twice_is_refused(tmp_path):
    root = write_release(tmp_path / "pub", users=1, runs=("mem0_pooled_50",))
    async with open_store(tmp_path / "s.db") as store:
        await import_release(store, root)
        with pytest.raises(BadInput, match="already in the store"):
            await import_release(store, root)


def _tree_digest(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


async def test_export_round_trips_and_is_byte_identical(tmp_path):
    root = write_release(tmp_path / "pub", users=2, runs=("amem_pooled_50", "nomem_pooled_50"))
    async with open_store(tmp_path / "a.db") as store:
        await import_release(store, root)
        assert await export_runs(store, None, tmp_path / "out1") == ["amem_pooled_50", "nomem_pooled_50"]
        await export_runs(store, None, tmp_path / "out2")
        originals = {r: await store.scores.load(r) for r in ("amem_pooled_50", "nomem_pooled_50")}
        episodes = await store.episodes.load("amem_pooled_50")
    assert _tree_digest(tmp_path / "out1") == _tree_digest(tmp_path / "out2")
    out = tmp_path / "out1"
    episode = orjson.loads((out / "history/amem_pooled_50/user_001/episode_1.json").read_bytes())
    assert set(episode) == {"user_id", "task", "ground_truth", "end_reason", "final_preference_score", "turns"}
    assert set(episode["turns"][0]) == {"turn", "agent_response", "user_simulator", "preference_evaluator"}
    recon = orjson.loads((out / "output/amem_pooled_50_retrieve/recon_judge/user_001.json").read_bytes())
    assert set(recon["per_category"]) == {"skill_memory", "knowledge_memory", "episodic_memory", "self_model",
                                          "assistance_preference"}
    assert (out / "output/_task_design_oracle/user_002.json").exists()
    assert not list(out.rglob("*_merged.json"))

    async with open_store(tmp_path / "b.db") as store:
        assert await import_release(store, out, name="again") == ["amem_pooled_50", "nomem_pooled_50"]
        for run, recons in originals.items():
            assert await store.scores.load(run) == recons
        assert await store.episodes.load("amem_pooled_50") == episodes
        assert len(await store.attributions.load("amem_pooled_50")) == 2 * 2 * 31


async def test_export_refuses_unknown_runs(tmp_path):
    async with open_store(tmp_path / "s.db") as store:
        with pytest.raises(BadInput, match="no such run"):
            await export_runs(store, ["nope"], tmp_path / "out")


async def test_tables_recompute_the_published_figures_from_the_imported_raw_records(tmp_path):
    from statistics import mean

    from memaudit.tables.paper import compute_tables

    root = write_release(tmp_path / "pub", users=3, runs=("amem_pooled_50",), turns=4)
    async with open_store(tmp_path / "s.db") as store:
        await import_release(store, root)
        tables = await compute_tables(store, bootstrap=0)
    [row] = tables["table2"]

    completion, b_retrieve = [], []
    for i in range(1, 4):
        user = f"user_{i:03d}"
        episodes = [orjson.loads((root / f"history/amem_pooled_50/{user}/episode_{t}.json").read_bytes())
                    for t in range(1, 32)]
        completion.append(sum(e["end_reason"] == "satisfied" for e in episodes) / 31)
        details = orjson.loads((root / f"output/amem_pooled_50_retrieve/recon_judge/{user}.json").read_bytes())["details"]
        by_category = {}
        for d in details:
            by_category.setdefault(d["category"], []).append(d["score"])
        b_retrieve.append(mean(mean(v) for v in by_category.values()))
    assert row["run"] == "amem_pooled_50" and row["users"] == 3
    assert row["A"] == pytest.approx(100 * mean(completion))
    assert row["B_retrieve"] == pytest.approx(mean(b_retrieve))
    assert row["items"] == 3 and row["chars"] == 60


async def test_a_run_of_the_first_tasks_only_stays_partial(tmp_path):
    root = write_release(tmp_path / "pub", users=1, runs=("mem0_pooled_50",))
    for i in range(5, 32):
        (root / f"history/mem0_pooled_50/user_001/episode_{i}.json").unlink()
    async with open_store(tmp_path / "s.db") as store:
        await import_release(store, root)
        assert (await store.runs.get("mem0_pooled_50")).config.tasks == 4
        assert (await store.episodes.last_snapshot("mem0_pooled_50", "user_001"))["task_idx"] == 4


async def test_a_rollout_exports_byte_identically_and_reimports(tmp_path, settings, fake):
    from dataclasses import replace

    from memaudit.bench.instances import load_release_benchmark
    from memaudit.llm.embed import Embedder
    from memaudit.rollout.runner import run_rollout
    from memaudit.runtime import open_runtime
    from tests.rollout.conftest import fake_encoder

    bench = load_release_benchmark(write_release(tmp_path / "rel", users=2), name="fx")
    fake.on_text(lambda body: f"A plan after {len(body['messages'])} messages.")
    episodes = {}
    for name in ("a", "b"):
        async with open_runtime(replace(settings, db=tmp_path / f"{name}.db"), transport=fake.transport(),
                                embedder=Embedder(None, encoder=fake_encoder)) as rt:
            await rt.store.benchmarks.save(bench)
            await run_rollout(rt, bench, ["longctx_full"], tasks=2, max_turns=2, progress=False)
            await export_runs(rt.store, None, tmp_path / f"out_{name}")
            episodes[name] = await rt.store.episodes.load("longctx_full")
    assert _tree_digest(tmp_path / "out_a") == _tree_digest(tmp_path / "out_b")

    async with open_store(tmp_path / "c.db") as store:
        assert await import_release(store, tmp_path / "out_a") == ["longctx_full"]
        assert await store.episodes.load("longctx_full") == episodes["a"]
        assert (await store.runs.get("longctx_full")).config.tasks == 2
        snapshot = await store.episodes.last_snapshot("longctx_full", "user_001")
        assert snapshot["task_idx"] == 2 and snapshot["n_items"] > 0


async def test_published_runs_import_despite_task_coverage_gaps_that_validate_reports(tmp_path):
    """The protocol scores an entry no task targets as `no_targeted_task`: such a published release
    imports as recorded, while `bench validate` still lists every coverage problem."""
    from memaudit.bench.instances import validate_bench

    root = write_release(tmp_path / "pub", users=1, runs=("amem_pooled_50",))
    [task_file] = sorted((root / "benchmark_data").glob("*/user_001.json"))
    data = orjson.loads(task_file.read_bytes())
    data["tasks"][0]["target_dimension"] = data["tasks"][1]["target_dimension"]
    data["tasks"][-1]["target_short"] = "a paraphrase of the bank's short"
    task_file.write_bytes(orjson.dumps(data))
    async with open_store(tmp_path / "s.db") as store:
        assert await import_release(store, root) == ["amem_pooled_50"]
        problems = await validate_bench(store, str(root))
    assert any("no task targets" in p for p in problems)
    assert any("targeted by several tasks" in p for p in problems)
    assert any("target_short" in p for p in problems)


async def test_export_is_atomic_and_replaces_an_earlier_export_whole(tmp_path, monkeypatch):
    """A killed export leaves nothing at --out (it is written beside it and renamed when whole);
    exporting fewer runs into an old export leaves none of the other runs' files."""
    from memaudit.release import exporter

    root = write_release(tmp_path / "pub", users=2, runs=("amem_pooled_50", "nomem_pooled_50"))
    out = tmp_path / "out"
    async with open_store(tmp_path / "a.db") as store:
        await import_release(store, root)
        real = exporter._export_run
        calls = []

        async def dies_on_the_second_run(*args):
            if calls:
                raise KeyboardInterrupt  # what a kill in the middle of the tree does to the command
            calls.append(args)
            await real(*args)
        monkeypatch.setattr(exporter, "_export_run", dies_on_the_second_run)
        with pytest.raises(KeyboardInterrupt):
            await export_runs(store, None, out)
        monkeypatch.setattr(exporter, "_export_run", real)
        assert not out.exists() and list(tmp_path.glob(".out.*")) == []  # nothing at --out, nothing left beside
        await export_runs(store, None, out)
        assert (out / "history/nomem_pooled_50").is_dir()
        await export_runs(store, ["amem_pooled_50"], out)
    assert not (out / "history/nomem_pooled_50").exists() and (out / "history/amem_pooled_50").is_dir()
    assert not list(out.rglob("*nomem*")) and list(tmp_path.glob(".out.*")) == []


async def test_export_refuses_a_folder_that_is_not_an_export(tmp_path):
    root = write_release(tmp_path / "pub", users=1, runs=("nomem_pooled_50",))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    async with open_store(tmp_path / "a.db") as store:
        await import_release(store, root)
        with pytest.raises(BadInput, match="'thesis.tex', which no export writes"):
            await export_runs(store, None, mine)
    assert (mine / "thesis.tex").read_text() == "years of work"


@pytest.mark.parametrize("plant", ["fifo", "loop"])
def test_a_release_holding_a_fifo_or_a_symlink_loop_is_refused_in_one_line(tmp_path, capsys, plant):
    import os

    from memaudit.cli import main

    root = write_release(tmp_path / "pub", users=1, runs=("nomem_pooled_50",))
    target = root / "history/nomem_pooled_50/user_001/episode_1.json"
    target.unlink()
    if plant == "fifo":
        os.mkfifo(target)  # a read would block for ever
    else:
        target.symlink_to(target)
    with pytest.raises(SystemExit) as exit_info:
        main(["import-release", str(root), "--db", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "episode_1.json" in err and ("not a regular file" in err or "symlink loop" in err or "cannot be read" in err)
