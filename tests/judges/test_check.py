"""judge-check: control answers expose a lenient judge (passes everything) and a harsh one
(passes nothing), without a rollout; control answers are written once and cached."""
from __future__ import annotations

import anyio
import orjson
import pytest

from memaudit.cli import main
from memaudit.tables.judge_checks import Thresholds, check_summary
from memaudit.scoring.judge_check import other_value, run_judge_check, sample_entries
from memaudit.replay import replay_runs
from memaudit.scoring.recovery import score_runs
from memaudit.tables.paper import compute_tables
from memaudit.store import open_store
from memaudit.testing.fake_openai import FakeOpenAI
from memaudit.testing.http_server import serve
from tests.judges.helpers import fixed_judges, panel
from tests.rollout.conftest import make_bench
from tests.scoring.recorded import record, requests_for, runtime, script

pytestmark = pytest.mark.anyio


async def test_two_lenient_judges_and_one_harsh(settings, fake):
    fixed_judges(fake)
    async with runtime(settings, fake) as rt:
        bench = make_bench(n_users=3, n_tasks=1)
        await rt.store.benchmarks.save(bench, replace=True)
        await run_judge_check(rt, [bench.name], panel(rt), per_category=2)
        summary = await check_summary(rt.store, [bench.name])
        writes = len(requests_for(fake, "control_writer"))
        await run_judge_check(rt, [bench.name], panel(rt), per_category=2)
    judges = summary["judges"]
    for name in ("top-a", "top-b"):
        assert judges[name]["flag"] == "lenient" and judges[name]["negative_false_pass"] >= 0.9
        assert judges[name]["positive_pass"] == 1.0
    assert judges["low"]["flag"] == "harsh" and judges["low"]["positive_pass"] == 0.0
    assert judges["low"]["negative_false_pass"] == 0.0
    low, high = judges["low"]["positive_pass_ci95"]
    assert low == 0.0 and 0 < high < 1
    assert writes == 10  # one control_writer call per sampled entry (5 categories x 2)
    assert len(requests_for(fake, "control_writer")) == writes  # written once, then cached


def test_samples_are_seeded_and_other_values_come_from_other_users():
    bench = make_bench(n_users=3, n_tasks=1)
    first, again, other = (sample_entries(bench, 2, seed) for seed in (0, 0, 1))
    assert [(u.id, e.dimension) for u, e in first] == [(u.id, e.dimension) for u, e in again]
    assert [(u.id, e.dimension) for u, e in first] != [(u.id, e.dimension) for u, e in other]
    user, entry = first[0]
    value, source = other_value(bench, user, entry, 0)
    assert source != user.id and value != entry.short


async def test_thresholds_decide_the_flag(settings, fake):
    fixed_judges(fake, {"half": 0.5})
    async with runtime(settings, fake) as rt:
        bench = make_bench(n_users=2, n_tasks=1)
        await rt.store.benchmarks.save(bench, replace=True)
        await run_judge_check(rt, [bench.name], panel(rt, ["half"]), per_category=1)
        strict = await check_summary(rt.store, [bench.name])
        loose = await check_summary(rt.store, [bench.name], Thresholds(max_false_pass=1.0, min_pass=0.0))
    assert strict["judges"]["half"]["flag"] == "lenient+harsh"
    assert loose["judges"]["half"]["flag"] == "ok"


async def test_checks_reach_the_tables_and_replay(settings, fake):
    fixed_judges(script(fake))
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=2, tasks=1)
        await score_runs(rt, ["longctx_full"], ["dump_all"], panel=panel(rt))
        await run_judge_check(rt, ["tiny"], panel(rt, repeats=2), per_category=1)
        tables = await compute_tables(rt.store, bootstrap=0)
    per_judge = {j["model"]: j for j in tables["judges"]["per_judge"]}
    assert per_judge["top-a"]["flag"] == "lenient" and per_judge["low"]["flag"] == "harsh"
    assert per_judge["top-a"]["retest_changed"] == 0.0
    assert await replay_runs(settings) is None


def test_judge_check_command_against_a_loopback_fake(tmp_path, capsys):
    fake = fixed_judges(FakeOpenAI())
    db = str(tmp_path / "m.db")

    async def save():
        async with open_store(db) as store:
            await store.benchmarks.save(make_bench(n_users=2, n_tasks=1), replace=True)

    anyio.run(save)
    with serve(fake) as url:
        main(["--db", db, "--base-url", url, "--model", "fake-model", "judge-check", "--judges", "top-a,top-b,low",
              "--per-category", "1", "--format", "json"])
    summary = orjson.loads(capsys.readouterr().out)
    assert {n: j["flag"] for n, j in summary["judges"].items()} == {"top-a": "lenient", "top-b": "lenient",
                                                                     "low": "harsh"}
    with pytest.raises(SystemExit) as info:
        main(["--db", db, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "judge-check", "--judges", "a,b"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "odd number of judges" in err


def test_judge_check_shards_together_check_the_whole_sample(tmp_path, capsys):
    """--shard I/N on judge-check: each (benchmark, user) cell is checked by exactly one shard, so
    the shards' verdicts together are the unsharded command's."""
    fake = fixed_judges(FakeOpenAI())

    async def save(db):
        async with open_store(db) as store:
            await store.benchmarks.save(make_bench(n_users=4, n_tasks=1), replace=True)

    async def verdicts(db):
        async with open_store(db) as store:
            async with store.conn.execute("SELECT * FROM control_verdicts ORDER BY 1, 2, 3, 4, 5, 6") as cursor:
                return [tuple(row) for row in await cursor.fetchall()]

    whole, sharded = str(tmp_path / "whole.db"), str(tmp_path / "sharded.db")
    for db in (whole, sharded):
        anyio.run(save, db)
    common = ["--base-url", None, "--model", "fake-model", "judge-check", "--judges", "top-a,top-b,low",
              "--per-category", "2", "--format", "json"]
    with serve(fake) as url:
        common[1] = url
        main(["--db", whole, *common])
        for spec in ("1/2", "2/2"):
            main(["--db", sharded, *common, "--shard", spec])
    capsys.readouterr()
    assert anyio.run(verdicts, sharded) == anyio.run(verdicts, whole) != []
