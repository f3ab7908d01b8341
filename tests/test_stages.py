"""Every stage (memaudit/stages.py) is taken by every path that goes stage by stage: replay
re-executes it and compares its tables, `cost` names it from its artifacts' prefixes, `plan`
estimates it when it has default rates (units counted in a pilot and in a study), its command takes
`--batch` exactly when it is batchable and `--shard` (recording the stage) exactly when it is
shardable. A stage added to STAGES that some path skips fails here, with the path named."""
from __future__ import annotations

import anyio
import click
import pytest

from memaudit.cli import cli
from memaudit.replay import REEXECUTE
from memaudit.stages import (EPISODE, PLANNED, RESCORE, SCORE, STAGES, TARGET, Stage, Unit, stage_of)
from memaudit.store import open_store
from memaudit.store.artifacts import ARTIFACTS
from memaudit.study.cost import stage_of as cost_stage
from memaudit.study.plan import DEFAULT_RATES, STUDY_COMMANDS, Study, default_rates, study_units
from tests.rollout.conftest import make_bench


def command(stage: Stage):
    return cli.get_command(click.Context(cli), stage.name)


def options(stage: Stage) -> set[str]:
    found = command(stage)
    return {p.name for p in found.params} if found is not None else set()


def artifact(stage: Stage, prefix: str) -> str:
    """An artifact name of the stage's shape (`recon:<mode>:<k>:<variant>:<user>:<dimension>`)."""
    return f"{prefix}:dump_all:0:{'j2' if stage.variants else 'default'}:user_001:d"


def units_counted(tmp_path) -> dict:
    """The units `plan` measures a pilot's run against, per stage."""
    async def count():
        async with open_store(tmp_path / "units.db") as store:
            return await store.plans.units("any")
    return anyio.run(count)


def paths_skipping(stage: Stage, tmp_path) -> list[str]:
    """The paths that do not take `stage` as its declaration says they should."""
    skipped = []
    if stage not in REEXECUTE:
        skipped.append("replay")
    if any(t not in ARTIFACTS for t in stage.tables):
        skipped.append("replay's comparison")
    if any(stage_of(artifact(stage, p)) is not stage or cost_stage(artifact(stage, p)) != stage.name
           for p in stage.prefixes):
        skipped.append("cost")
    if command(stage) is None:
        skipped.append("cli")
    if ("use_batch" in options(stage)) != stage.batchable:
        skipped.append("batch")
    if ("shard" in options(stage)) != stage.shardable or (
            stage.shardable and getattr(command(stage).callback, "records_shard_stage", None) is not stage):
        skipped.append("shard")
    if stage.rates:
        bench = make_bench(n_users=1, n_tasks=2)
        units = study_units(bench, Study(bench.name, ("nomem",)), passes=1)
        if (stage.name not in STUDY_COMMANDS or DEFAULT_RATES.get(stage.name) != stage.rates
                or stage.name not in default_rates("nomem") or units.get(stage.name, 0) <= 0
                or stage.name not in units_counted(tmp_path)):
            skipped.append("plan")
    return skipped


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_no_path_skips_a_stage(stage, tmp_path):
    assert paths_skipping(stage, tmp_path) == []


def test_a_stage_declared_but_not_built_is_named_for_every_path_it_misses(tmp_path):
    scratch = Stage("scratch", ("scratch",), {"scratch_rows": ("run",)}, batchable=True, shardable=True,
                    rates={"agent": (1.0, 10, 1)}, unit=Unit(EPISODE, "episodes"))
    assert paths_skipping(scratch, tmp_path) == ["replay", "replay's comparison", "cost", "cli", "batch", "shard",
                                                 "plan"]


def test_the_declarations_agree_with_each_other():
    names = [s.name for s in STAGES]
    assert len(set(names)) == len(names)
    tables = [t for s in STAGES for t in s.tables]
    assert len(set(tables)) == len(tables) and list(ARTIFACTS) == tables  # each table is one stage's
    assert all(s.unit is not None and s.unit.kind in (EPISODE, TARGET) for s in PLANNED)
    assert stage_of("recon:retrieve:5:j2:user_001:d") is RESCORE and stage_of("evolving:dump_all:0:default:u:d") is SCORE
    assert stage_of("nothing:u") is None and cost_stage("nothing:u") == "nothing"
