"""Judge panels: every panel judge grades every target, the row keeps the median of the valid
scores, a dropped judge is recorded, an even panel is refused, and agreement is what the
`krippendorff` package computes on the stored score matrix."""
from __future__ import annotations

from dataclasses import replace

import krippendorff
import numpy as np
import pytest

from memaudit.config import load_settings
from memaudit.errors import BadInput
from memaudit.scoring.panel import Panel, Verdict, panel_score
from memaudit.tables.judges import judges_section
from memaudit.replay import replay_runs
from memaudit.scoring.recovery import UNKNOWN_REASON, score_runs
from memaudit.scoring.rescore import rescore_runs
from memaudit.tables.paper import compute_tables
from memaudit.tables.paper_render import render
from memaudit.store import open_store, select_runs
from tests.judges.helpers import PANEL, fixed_judges, panel
from tests.scoring.recorded import record, requests_for, runtime, script

pytestmark = pytest.mark.anyio


async def test_panel_scores_the_median_and_keeps_every_verdict(settings, fake):
    fixed_judges(script(fake))
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=2, tasks=2)
        await score_runs(rt, ["longctx_full"], ["dump_all"], panel=panel(rt))
        rows = await rt.store.scores.load("longctx_full")
        verdicts = await rt.store.judges.verdicts(["longctx_full"], "default")
        passes = await rt.store.scores.passes("longctx_full")
    judged = [r for r in rows if r.status == "ok"]
    assert judged and all(r.score == 1.0 for r in judged)  # median of 1, 1, 0
    assert len(verdicts) == 3 * len(judged)
    assert {v["judge"] for v in verdicts} == set(PANEL)
    assert {v["model"] for v in requests_for(fake, "recovery_judge")} == set(PANEL)
    assert passes[0].config.scorer["judges"] == PANEL


async def test_the_one_judge_is_a_panel_of_one_recorded_as_a_single_judge(settings, fake):
    """The configured judge grades through the panel path with the call a named panel's repeat 0
    makes (the same key), and records neither verdict rows nor a panel: old stores replay identical."""
    fixed_judges(script(fake), {"judge": 0.75})
    settings = replace(settings, model="judge")
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=2)
        alone = Panel.build(rt.llm, None)
        assert alone.solo and alone.names == ["judge"]
        await score_runs(rt, ["longctx_full"], ["dump_all"])
        rows = await rt.store.scores.load("longctx_full")
        single_keys = {r["key"] for r in await rt.store.fetchall("SELECT key FROM calls WHERE role='recovery_judge'")}
        passes = await rt.store.scores.passes("longctx_full")
        assert await rt.store.judges.verdicts(["longctx_full"], "default") == []
        await rescore_runs(rt, ["longctx_full"], "named", panel=panel(rt, ["judge"]))
        named_keys = {r["key"] for r in await rt.store.fetchall("SELECT key FROM calls WHERE role='recovery_judge'")}
        named = await rt.store.scores.load("longctx_full", variant="named")
    judged = [r for r in rows if r.status == "ok" and r.judge_reason != UNKNOWN_REASON]
    assert judged and all(r.score == 0.75 and r.judge_reason == "scripted" for r in judged)
    assert not {"judges", "repeats"} & set(passes[0].config.scorer)
    assert named_keys == single_keys  # a panel of the same one model asks the same calls
    assert all(r.judge_reason.startswith("panel median of 1") for r in named if r.judge_reason != UNKNOWN_REASON)


async def test_identical_judges_agree_exactly_and_alpha_matches_the_package(settings, fake):
    scores = {"top-a": 1.0, "top-b": 1.0}
    fake.on("recovery_judge", lambda body: {"score": scores.get(body["model"], float(len(body["messages"][-1]["content"]) % 2)),
                                            "reason": "r"})
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=2, tasks=2)
        await score_runs(rt, ["longctx_full"], ["dump_all"], panel=panel(rt, ["top-a", "top-b", "mixed"]))
        section = await judges_section(rt.store, await select_runs(rt.store, None), resamples=50)
        verdicts = await rt.store.judges.verdicts(["longctx_full"], "default")
    targets = sorted({(v["user_id"], v["dimension"]) for v in verdicts})
    matrix = np.array([[next(v["score"] for v in verdicts if v["judge"] == j and (v["user_id"], v["dimension"]) == t)
                        for t in targets] for j in ["top-a", "top-b", "mixed"]])
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal",
                                  value_domain=[0.0, 0.25, 0.5, 0.75, 1.0])
    agreement = section["agreement"]
    assert agreement["alpha_ordinal"] == pytest.approx(expected)
    pair = next(p for p in agreement["pairs"] if (p["a"], p["b"]) == ("top-a", "top-b"))
    assert pair["exact"] == 1.0
    assert section["panel"] == ["top-a", "top-b", "mixed"]
    assert [j["model"] for j in section["per_judge"]] == ["top-a", "top-b", "mixed"]
    assert section["per_judge"][0]["B_dump_all"] == pytest.approx(1.0)


async def test_an_even_panel_is_refused(settings, fake):
    async with runtime(settings, fake) as rt:
        with pytest.raises(BadInput, match="odd number of judges.*got 2"):
            Panel.build(rt.llm, ["a", "b"])


def test_a_dropped_judge_leaves_the_median_of_the_others():
    ok = [Verdict("a", 0, 1.0, "r", "ok"), Verdict("b", 0, 0.25, "r", "ok"), Verdict("c", 0, None, None, "failed", "x")]
    score, reason, error = panel_score(ok)
    assert score == 0.25 and error is None and "1 dropped" in reason  # the lower median stays on the grid
    gone = [Verdict(n, 0, None, None, "failed", "invalid output") for n in "abc"]
    assert panel_score(gone)[0] is None and "every panel judge failed" in panel_score(gone)[2]


async def test_a_judge_invalid_after_repair_is_dropped_and_all_dropped_is_a_failed_row(settings, fake):
    fake.on("recovery_judge", lambda body: {"score": 0.3, "reason": "off the grid"} if body["model"] != "top-a"
            else {"score": 1.0, "reason": "r"})
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=1)
        await score_runs(rt, ["longctx_full"], ["dump_all"], panel=panel(rt, ["top-a", "x", "y"]))
        await score_runs(rt, ["longctx_full"], ["dump_all"], panel=panel(rt, ["x"]), variant="alldrop")
        rows = await rt.store.scores.load("longctx_full")
        dropped = await rt.store.scores.load("longctx_full", variant="alldrop")
        verdicts = await rt.store.judges.verdicts(["longctx_full"], "default")
    assert {r.score for r in rows if r.status == "ok"} == {1.0}
    assert {v["status"] for v in verdicts if v["judge"] != "top-a"} == {"failed"}
    assert all(r.status == "failed" and "every panel judge failed" in r.error for r in dropped)


async def test_repeats_ask_again_with_distinct_seeds(settings, fake):
    fake.on("recovery_judge", lambda body: {"score": [0.0, 1.0][body["seed"] % 2], "reason": "r"})
    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=1)
        await score_runs(rt, ["longctx_full"], ["dump_all"], panel=panel(rt, ["j"], repeats=3))
        verdicts = await rt.store.judges.verdicts(["longctx_full"], "default")
        section = await judges_section(rt.store, await select_runs(rt.store, None), resamples=0)
    seeds = {}
    for body in requests_for(fake, "recovery_judge"):
        seeds.setdefault(body["messages"][-1]["content"], set()).add(body["seed"])
    assert all(len(s) == 3 for s in seeds.values())
    assert {v["repeat"] for v in verdicts} == {0, 1, 2}
    assert 0 < section["per_judge"][0]["retest_changed"] <= 1


async def test_rescore_with_a_panel_and_replay_is_identical(settings, fake):
    fixed_judges(script(fake))
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=2)
        await score_runs(rt, ["longctx_full"], ["dump_all", "retrieve"], panel=panel(rt))
        await rescore_runs(rt, ["longctx_full"], "panel2", panel=panel(rt, ["top-a", "low", "z"], repeats=2))
        tables = await compute_tables(rt.store, bootstrap=0)
    requests = len(fake.requests)
    assert await replay_runs(settings) is None
    assert len(fake.requests) == requests
    text = render(tables, "md")
    assert "Judges — panel top-a, top-b, low" in text and "Krippendorff" in text
    assert "judges" in render(tables, "latex") and "judges_pairs" in render(tables, "csv")


def test_config_panel_and_judge_endpoints(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[roles.recovery_judge]\nmodels = ["a", "b", "c"]\n\n'
                      '[judges.b]\nbase_url = "http://other.test/v1"\nmodel = "b-large"\n')
    settings = load_settings(config=str(config), base_url="http://fake.test/v1", model="m", env={})
    from memaudit.scoring.panel import judge_client, panel_names

    assert panel_names(settings, None) == ["a", "b", "c"]
    assert panel_names(settings, ["x"]) == ["x"]

    class FakeLLM:
        pass

    llm = FakeLLM()
    llm.settings = settings
    b = judge_client(llm, "b").settings.role("recovery_judge")
    assert b.model == "b-large" and b.base_urls == ("http://other.test/v1",)
    a = judge_client(llm, "a").settings.role("recovery_judge")
    assert a.model == "a" and a.base_urls == ("http://fake.test/v1",)


def test_bad_panel_config_is_one_line(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[judges.b]\nbase_urll = "http://other.test/v1"\n')
    with pytest.raises(BadInput, match="unknown key") as info:
        load_settings(config=str(config), env={})
    assert "judges.b" in str(info.value)


async def test_an_imported_published_run_has_one_judge_and_no_agreement(tmp_path):
    from memaudit.release.importer import import_release
    from memaudit.store import open_store
    from memaudit.testing.release_fixture import write_release

    root = write_release(tmp_path / "release", users=2, runs=("amem_pooled_50",), turns=2)
    async with open_store(tmp_path / "audit.db") as store:
        await import_release(store, root)
        tables = await compute_tables(store, bootstrap=0)
    section = tables["judges"]
    assert section["panel"] == ["recorded judge"] and section["agreement"] is None
    assert "imported published run" in section["agreement_reason"]
    assert section["per_judge"][0]["B_dump_all"] == pytest.approx(tables["table2"][0]["B_dump_all"])
    assert "agreement | one judge: an imported published run" in render(tables, "md")


def test_a_judge_with_its_own_endpoint_replays_from_the_recorded_provenance(tmp_path, capsys):
    """A `[judges.NAME]` section gives a panel judge its own endpoint, model and sampling: the
    scoring pass records them (no endpoint, no key), and a bare `replay` rebuilds that judge."""
    import anyio

    from memaudit.cli import main
    from memaudit.testing.fake_openai import FakeOpenAI
    from memaudit.testing.http_server import serve

    db = tmp_path / "m.db"
    settings = load_settings(db=db, base_url="http://fake.test/v1", model="fake-model", backend="openai", env={})

    async def rollout():
        async with runtime(settings, script(FakeOpenAI())) as rt:
            await record(rt, ("longctx_full",), users=2, tasks=1)

    anyio.run(rollout)
    shared, own = fixed_judges(script(FakeOpenAI())), fixed_judges(FakeOpenAI(), {"big-low": 0.0})
    config = tmp_path / "panel.toml"
    with serve(shared) as url, serve(own) as own_url:
        config.write_text('[roles.recovery_judge]\nmodels = ["top-a", "top-b", "low"]\n\n'
                          f'[judges.low]\nbase_url = "{own_url}"\nmodel = "big-low"\ntemperature = 0.3\n'
                          'api_key_env = "LOW_JUDGE_KEY"\n')
        main(["--db", str(db), "--config", str(config), "--base-url", url, "--model", "fake-model",
              "--backend", "openai", "score", "--mode", "dump_all"])
    assert own.requests and {(b["model"], b["temperature"]) for b in own.requests} == {("big-low", 0.3)}
    capsys.readouterr()
    try:
        main(["--db", str(db), "replay"])
    except SystemExit as exc:
        assert exc.code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip().endswith("identical")

    async def recorded():
        async with open_store(db) as store:
            return (await store.scores.passes("longctx_full"))[0].config.scorer["provenance"]["judges"]

    judges = anyio.run(recorded)
    assert list(judges) == ["low"]  # the judges without a section are the recovery judge's settings
    assert judges["low"]["model"] == "big-low" and judges["low"]["temperature"] == 0.3
    assert not {"base_url", "api_key", "api_key_env"} & set(judges["low"])


@pytest.mark.anyio
async def test_a_panel_judge_whose_endpoint_is_down_is_named_by_its_judge(tmp_path):
    from dataclasses import replace

    from memaudit.errors import EndpointError
    from memaudit.llm.embed import Embedder
    from memaudit.runtime import open_runtime
    from tests.rollout.conftest import fake_encoder
    from memaudit.testing.fake_openai import FakeOpenAI
    from memaudit.testing.http_server import serve

    config = tmp_path / "panel.toml"
    config.write_text('[judges.judge-b]\nbase_url = "http://127.0.0.1:9/v1"\n')
    fake = fixed_judges(script(FakeOpenAI()))
    with serve(fake) as url:
        settings = replace(load_settings(db=tmp_path / "m.db", base_url=url, model="fake-model", backend="openai",
                                         config=config, env={}), backoff_base=0.001, backoff_cap=0.01)
        async with open_runtime(settings) as rt:
            rt.embedder = Embedder(rt.store.vectors, encoder=fake_encoder)
            await record(rt, ("longctx_full",), users=1, tasks=1)
            with pytest.raises(EndpointError) as down:
                await score_runs(rt, ["longctx_full"], ["dump_all"], panel=panel(rt, ["top-a", "judge-b", "low"]))
    assert str(down.value).count("\n") == 0 and "panel judge judge-b: unreachable" in str(down.value)
    assert "127.0.0.1:9" in str(down.value)
