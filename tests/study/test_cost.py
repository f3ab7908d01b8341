"""`memaudit cost` and `memaudit plan`: tokens priced on demand and in batch from a TOML price list,
an unpriced model named (never priced 0), and a plan from a pilot within 20% of the calls of the
run it predicts (the fake's users differ: one user alone is too small a pilot), shown beside the actual by `cost`."""
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
from memaudit.study.plan import plan_study
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


async def sample_study(settings, fake, db, users: int):
    """The bundled sample on the loopback fake: rollout, both modes scored, attribution."""
    async with runtime(replace(settings, db=db), fake) as rt:
        bench = await resolve_bench(rt.store, "sample")
        runs = await run_rollout(rt, bench, SYSTEMS, users=[u.id for u in bench.users[:users]], tasks=3,
                                 max_turns=3, progress=False)
        await score_runs(rt, runs, ["dump_all", "retrieve"])
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
async def test_a_plan_from_a_pilot_is_within_20_percent_and_cost_shows_it_beside_the_actual(
        settings, fake, tmp_path):
    script(fake)
    pilot, study_db = tmp_path / "pilot.db", tmp_path / "study.db"
    await sample_study(settings, fake, pilot, users=2)  # the pilot: two users of the three the study runs
    prices_file = tmp_path / "prices.toml"
    prices_file.write_text(PRICES)
    async with open_store(study_db) as store, open_store(pilot) as pilot_store:
        bench = await resolve_bench(store, "sample")
        users = min(3, len(bench.users))
        planned = await plan_study(store, settings, bench, SYSTEMS, users=users, tasks=3,
                                   modes=["dump_all", "retrieve"], ks=(5,), judges=None, pilot=pilot_store,
                                   prices=load_prices(prices_file))
    runs = await sample_study(settings, fake, study_db, users=users)
    async with open_store(study_db) as store:
        actual = await run_costs(store, runs, load_prices(prices_file))
    for r in actual["runs"]:
        estimate = planned[r["run"]]
        assert r["estimate"]["calls"] == estimate["calls"] and estimate["basis"] == "pilot"
        assert abs(estimate["calls"] - r["calls"]) <= 0.2 * r["calls"], (r["run"], estimate["calls"], r["calls"])
    cost = [sys.executable, str(REPO / "memaudit.py"), "cost", "--db", str(study_db), "--prices", str(prices_file)]
    printed = subprocess.run(cost, capture_output=True, text=True, check=True).stdout
    assert "planned calls" in printed and "batch" in printed and "2026-01-01" in printed
    shape = orjson.loads(subprocess.run([*cost, "--format", "json"], capture_output=True, check=True).stdout)
    assert set(shape) >= {"runs", "total"}
    assert set(shape["runs"][0]) >= {"run", "usd_on_demand", "usd_batch", "by_role"}


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
        planned = await plan_study(store, settings, await resolve_bench(store, "sample"), ["longctx_full"], users=2,
                                   tasks=3, modes=["dump_all"], ks=(5,), judges=None, pilot=store,
                                   prices=load_prices(prices_file))
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
