"""`memaudit cost` and `memaudit plan`: tokens priced on demand and in batch from a TOML price list,
an unpriced model named (never priced 0), and a plan from a pilot made with the study's flags within
25% of the calls of the run it predicts (issue 33's acceptance: a one-user pilot of 3 tasks,
--max-turns 2, --dims targeted, for a three-user study), shown beside the actual by `cost`; the
plan's study flags (users by id, stages, a judge panel and its repeats; an even panel refused)."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from memaudit.bench.instances import resolve_bench
from memaudit.errors import BadInput
from memaudit.rollout.runner import run_rollout
from memaudit.scoring.attribution import attribute_runs
from memaudit.scoring.recovery import score_runs
from memaudit.store import open_store
from memaudit.study.cost import load_prices, run_costs, stage_of
from memaudit.study.plan import Study, pilot_differences, plan_study
from memaudit.testing.fake_openai import FakeOpenAI
from tests.scoring.recorded import runtime, script

PRICES = """
date = "2026-01-01"
source = "a test"
[models."fake-model"]
input_per_mtok = 2.0
cached_input_per_mtok = 0.5
output_per_mtok = 8.0
batch_input_per_mtok = 1.0
batch_output_per_mtok = 4.0
"""
SYSTEMS = ["longctx_full", "nomem"]
REPO = Path(__file__).resolve().parents[2]


async def sample_study(settings, fake, db, users: int, max_turns: int = 3, dims: str = "all", judges=None):
    """The bundled sample on the fake: rollout, both modes scored (by a panel of `judges`), attribution."""
    from memaudit.scoring.panel import Panel

    async with runtime(replace(settings, db=db), fake) as rt:
        bench = await resolve_bench(rt.store, "sample")
        runs = await run_rollout(rt, bench, SYSTEMS, users=[u.id for u in bench.users[:users]], tasks=3,
                                 max_turns=max_turns, progress=False)
        await score_runs(rt, runs, ["dump_all", "retrieve"], dims=dims, panel=Panel.build(rt.llm, judges))
        await attribute_runs(rt, runs, ["dump_all", "retrieve"])
    return runs


def test_the_bundled_price_list_states_its_date_and_source_and_a_user_file_overrides_it(tmp_path):
    bundled = load_prices()
    assert bundled.date and "pricing" in bundled.source and "gpt-4o-mini" in bundled.models
    own = tmp_path / "prices.toml"
    own.write_text(PRICES.replace("fake-model", "gpt-4o-mini"))
    merged = load_prices(own)
    assert merged.models["gpt-4o-mini"].input_per_mtok == 2.0 and "gpt-5.4" in merged.models
    assert merged.date == "2026-01-01"


@pytest.mark.parametrize("text, field", [("[models.m]\ninput_per_mtok = 1", "models.m"),
                                         (PRICES.replace("= 8.0", "= -1"), "models.fake-model"),
                                         (PRICES + "\nextra_per_mtok = 3\n", "models.fake-model"),
                                         (PRICES.replace("= 8.0", "= nan"), "models.fake-model"),
                                         (PRICES.replace("= 2.0", "= inf"), "models.fake-model"),
                                         ("[models", None)])
def test_a_bad_price_file_is_one_error_naming_file_and_model(tmp_path, text, field):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(BadInput) as refused:
        load_prices(path)
    assert str(path) in str(refused.value) and (field is None or field in str(refused.value))


def test_stages_come_from_artifact_names():
    assert [stage_of(a) for a in ("episode:u:1", "recon:dump_all:0:default:u:d", "recon:retrieve:5:j2:u:d",
                                  "attr:dump_all:0:default:u:d", "act:5:u:d")] == \
        ["rollout", "score", "rescore", "attribute", "utilization"]


@pytest.mark.anyio
async def test_cost_prices_batch_at_the_batch_rate_and_names_an_unpriced_model(settings, fake, tmp_path):
    script(fake)
    db = tmp_path / "s.db"
    runs = await sample_study(settings, fake, db, users=1)
    prices_file = tmp_path / "prices.toml"
    prices_file.write_text(PRICES)
    async with open_store(db) as store:
        priced = await run_costs(store, runs, load_prices(prices_file))
        unpriced = await run_costs(store, runs, load_prices())
    for r in priced["runs"]:
        assert r["calls"] > 0 and r["usd_on_demand"] > r["usd_batch"] > 0
        uncached, cached, completion = r["uncached_prompt_tokens"], r["cached_prompt_tokens"], r["completion_tokens"]
        assert r["usd_batch"] == pytest.approx((uncached * 1.0 + cached * 0.25 + completion * 4.0) / 1e6)
        assert r["usd_on_demand"] == pytest.approx((uncached * 2.0 + cached * 0.5 + completion * 8.0) / 1e6)
        assert set(r["by_stage"]) >= ({"rollout", "score"} if r["run"] == "longctx_full" else {"rollout"})
    for r in unpriced["runs"]:
        assert r["usd_on_demand"] is None and r["unpriced"] == ["fake-model"]
    assert unpriced["total"]["usd_on_demand"] is None and unpriced["total"]["unpriced"] == ["fake-model"]


@pytest.mark.anyio
async def test_a_one_user_pilot_with_the_studys_flags_plans_it_within_25_percent_and_cost_shows_it(
        settings, fake, tmp_path):
    script(fake)
    pilot, study_db = tmp_path / "pilot.db", tmp_path / "study.db"
    await sample_study(settings, fake, pilot, users=1, max_turns=2, dims="targeted")
    prices_file = tmp_path / "prices.toml"
    prices_file.write_text(PRICES)
    study = Study("sample", tuple(SYSTEMS), users="3", tasks=3, max_turns=2, dims="targeted")
    async with open_store(study_db) as store, open_store(pilot) as pilot_store:
        bench = await resolve_bench(store, "sample")
        planned = await plan_study(store, settings, bench, study, pilot=pilot_store, prices=load_prices(prices_file))
    runs = await sample_study(settings, fake, study_db, users=3, max_turns=2, dims="targeted")
    async with open_store(study_db) as store:
        actual = await run_costs(store, runs, load_prices(prices_file))
    for r in actual["runs"]:
        estimate = planned[r["run"]]
        assert r["estimate"]["calls"] == estimate["calls"] and estimate["basis"] == "pilot"
        assert abs(estimate["calls"] - r["calls"]) <= 0.25 * r["calls"], (r["run"], estimate["calls"], r["calls"])
    cost = [sys.executable, str(REPO / "memaudit.py"), "cost", "--db", str(study_db), "--prices", str(prices_file)]
    printed = subprocess.run(cost, capture_output=True, text=True, check=True).stdout
    assert "planned calls" in printed and "batch" in printed and "2026-01-01" in printed
    shape = orjson.loads(subprocess.run([*cost, "--format", "json"], capture_output=True, check=True).stdout)
    assert set(shape) >= {"runs", "total"}
    assert set(shape["runs"][0]) >= {"run", "usd_on_demand", "usd_batch", "by_role"}


@pytest.mark.anyio
async def test_the_plan_counts_the_units_the_commands_would_run(settings, tmp_path):
    async with open_store(tmp_path / "p.db") as store:
        bench = await resolve_bench(store, "sample")
        ids = ",".join(u.id for u in bench.users[1:3])

        async def units(**flags):
            found = await plan_study(store, settings, bench, Study("sample", ("nomem", "bm25"), **flags), pilot=None,
                                     prices=load_prices())
            return {run: e["units"] for run, e in found.items()}

        bank = sum(len(u.bank) for u in bench.users[1:3])
        by_ids = await units(users=ids, tasks=3)
        assert by_ids["nomem"] == {"rollout": 6, "score": bank, "attribute": bank}  # nomem: no retrieve
        assert by_ids["bm25"]["score"] == 2 * bank  # dump_all and retrieve k=5
        targeted = await units(users=ids, tasks=3, dims="targeted", ks=(1, 5))
        assert targeted["bm25"]["score"] == 2 * 3 * 3  # 3 targeted entries per user, dump_all + two k
        beyond = await units(users=str(2 * len(bench.users)), tasks=3)
        assert beyond["nomem"]["rollout"] == 2 * 3 * len(bench.users)
        only_rollout = await plan_study(store, settings, bench, Study("sample", ("nomem",), stages=("rollout",)),
                                        pilot=None, prices=load_prices())
        assert set(only_rollout["nomem"]["by_stage"]) == {"rollout"}
        turns = await plan_study(store, settings, bench, Study("sample", ("nomem",), max_turns=1, tasks=2),
                                 pilot=None, prices=load_prices())
        assert turns["nomem"]["by_stage"]["rollout"]["agent"]["calls"] == 2 * len(bench.users)  # one reply each
        panel = await plan_study(store, settings, bench, Study("sample", ("nomem",), judges=("a", "b", "c"),
                                                               repeats=2), pilot=None, prices=load_prices())
        judge = panel["nomem"]["by_stage"]["score"]["recovery_judge"]
        assert judge["models"] == ["a", "b", "c"] and judge["calls"] == 6 * panel["nomem"]["units"]["score"]
        with pytest.raises(BadInput, match="odd number"):
            await plan_study(store, settings, bench, Study("sample", ("nomem",), judges=("a", "b")), pilot=None,
                             prices=load_prices())
        with pytest.raises(BadInput, match="user_404"):
            await plan_study(store, settings, bench, Study("sample", ("nomem",), users="user_404"), pilot=None,
                             prices=load_prices())


@pytest.mark.anyio
async def test_a_pilot_scored_by_a_panel_is_measured_per_judge_and_other_flags_are_named(settings, fake, tmp_path):
    script(fake)
    pilot = tmp_path / "pilot.db"
    await sample_study(settings, fake, pilot, users=1, judges=["a", "b", "c"])
    async with open_store(tmp_path / "p.db") as store, open_store(pilot) as pilot_store:
        bench = await resolve_bench(store, "sample")
        made = await run_costs(pilot_store, SYSTEMS, load_prices())
        planned = await plan_study(store, settings, bench, Study("sample", tuple(SYSTEMS), users="1", tasks=3,
                                                                 max_turns=2), pilot=pilot_store, prices=load_prices())
        # a plan that prices another model than the pilot ran on says so (the pilot's tokens are the fake's)
        priced = replace(settings, model="gpt-5.4-mini")
        other_model = await pilot_differences(pilot_store, Study("sample", tuple(SYSTEMS), max_turns=3), priced)
    assert other_model == [f"model {settings.model} where the plan prices gpt-5.4-mini"]
    judged = 0
    for r in made["runs"]:
        by_panel = r["by_stage"].get("score", {}).get("recovery_judge", {"calls": 0})["calls"]
        judged += by_panel
        one_judge = planned[r["run"]]["by_stage"].get("score", {}).get("recovery_judge", {"calls": 0})["calls"]
        assert one_judge == round(by_panel / 3)
        assert planned[r["run"]]["pilot_differs"] == ["--max-turns 3"]
    assert judged > 0


def test_a_system_the_pilot_did_not_run_takes_its_mean_and_the_default_memory_calls():
    from memaudit.study.plan import DEFAULT_MEMORY_CALLS, Rate, rates_for

    pilot = {"nomem": {"rollout": {"agent": Rate(2.0, 100)}, "score": {}},
             "longctx_full": {"rollout": {"agent": Rate(4.0, 300)}, "score": {"slot_fill": Rate(1.0, 900)}}}
    rates, basis = rates_for("amem", pilot)
    assert basis.startswith("pilot (other systems)")
    assert rates["rollout"]["agent"] == Rate(3.0, 200)
    assert rates["score"]["slot_fill"] == Rate(0.5, 900)  # nomem scored without a call
    assert rates["rollout"]["memory"].calls == DEFAULT_MEMORY_CALLS["amem"]
    assert rates_for("nomem", pilot) == ({**rates_for("nomem", {})[0], **pilot["nomem"]}, "pilot")
    assert rates_for("nomem", {})[1] == "defaults"


def test_an_even_panel_is_refused_by_plan_as_score_refuses_it(tmp_path, capsys):
    import anyio

    from memaudit.cli import main

    async def make_store():
        async with open_store(tmp_path / "s.db"):
            pass
    anyio.run(make_store)  # score refuses a missing store first
    said = {}
    for command in (["score", "--mode", "dump_all"], ["plan", "--bench", "sample", "--systems", "nomem"]):
        with pytest.raises(SystemExit) as exit_info:
            main([*command, "--judges", "judge-a,judge-b", "--db", str(tmp_path / "s.db")])
        assert exit_info.value.code == 2
        said[command[0]] = capsys.readouterr().err.strip()
    assert said["plan"] == said["score"] and "odd number" in said["plan"]


class NoUsage(FakeOpenAI):
    """A server that answers without `usage` (or, `odd`, with counts that are no numbers)."""

    def __init__(self, odd: bool = False):
        super().__init__()
        self.odd = odd

    def completion(self, body: dict, text: str) -> dict:
        answer = super().completion(body, text)
        if self.odd:
            answer["usage"] = {"prompt_tokens": "12", "completion_tokens": None}
        else:
            del answer["usage"]
        return answer


@pytest.mark.anyio
@pytest.mark.parametrize("odd, why", [(False, "the server sent no usage"),
                                      (True, "the server's usage has no numeric prompt and completion tokens")])
async def test_calls_without_usage_are_unknown_tokens_named_unpriced_never_0(settings, tmp_path, odd, why):
    from memaudit.cli.study_cmds import _cost_markdown

    fake = script(NoUsage(odd))
    db = tmp_path / "s.db"
    runs = await sample_study(settings, fake, db, users=1)
    prices_file = tmp_path / "prices.toml"
    prices_file.write_text(PRICES)
    async with open_store(db) as store:
        rows = await store.fetchall("SELECT response FROM calls WHERE ok=1")
        report = await run_costs(store, runs, load_prices(prices_file))
        planned = await plan_study(store, settings, await resolve_bench(store, "sample"),
                                   Study("sample", ("longctx_full",), users="2", tasks=3, modes=("dump_all",)),
                                   pilot=store, prices=load_prices(prices_file))
    assert rows and all(orjson.loads(r["response"])["usage"]["unknown"] == why for r in rows)
    total = report["total"]
    assert total["usd_on_demand"] is None and total["unknown_token_calls"] == total["calls"]
    assert total["unpriced_calls"] == {f"unknown tokens: {why}": total["calls"]}
    printed = _cost_markdown(report)
    assert "$0.0000" not in printed and f"call(s): unknown tokens: {why}" in printed
    estimate = planned["longctx_full"]
    assert estimate["usd_on_demand"] is None
    assert any(f"calls have no token counts ({why})" in reason for reason in estimate["unpriced_calls"])


def test_cost_names_the_price_file_as_its_source(tmp_path):
    from memaudit.cli.study_cmds import _prices_line

    own = tmp_path / "mine.toml"
    own.write_text(PRICES.replace('date = "2026-01-01"\nsource = "a test"\n', ""))
    line = _prices_line(load_prices(own).describe())
    assert line.startswith(f"Prices of no stated date ({own})") and "the bundled list of 2026-" in line
    assert "OpenAI" not in line.split(";")[0]


def test_a_deployed_library_is_planned_with_the_calls_its_adapter_declares():
    """`plan` without a pilot: a library's memory calls per episode are its declared calls per user
    message (adapters/deployed.py `CALLS_PER_MESSAGE`) times the episode's user messages (the task
    text and one per assistant reply), so libraries that call their model differently are planned
    differently (graphiti several calls a message, mem0ai one)."""
    from memaudit.adapters.registry import get_adapter
    from memaudit.study.plan import default_rates
    from tests.adapters.conftest import deployed_libraries, installed

    for system in deployed_libraries():
        rollout = default_rates(system)["rollout"]
        assert rollout["memory"].calls == get_adapter(system).CALLS_PER_MESSAGE * (1 + rollout["agent"].calls)
    if installed("graphiti") and installed("mem0ai"):
        assert default_rates("graphiti")["rollout"]["memory"].calls > default_rates("mem0ai")["rollout"]["memory"].calls
