"""The pipeline's stages, declared once: the commands that make a run's artifacts (rollout, score,
rescore, attribute, utilization, judge-check). Every path that treats stages one by one reads them
here: replay re-executes each and compares the tables it records (memaudit/replay.py,
store/artifacts.py), `cost` names the stage of each call from its artifact's prefix
(study/cost.py), `plan` estimates the stages that have default rates (study/plan.py), the command
line gives a stage its `--batch` and `--shard` options and records a shard's finished stage
(cli/common.py, store/shard_stages.py). tests/test_stages.py fails for a stage a path skips.

"Stage" means only this. What a role belongs to (dialogue, memory, scoring, …) is its phase
(memaudit/roles.py `PHASES`); the three questions of failure attribution are its steps
(memaudit/scoring/attribution.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

from memaudit.roles import (AGENT, DISCLOSURE, ELICITATION, ORACLE, PREF_JUDGE, RECOVERY_JUDGE, SIMULATOR,
                            SLOT_FILL)
from memaudit.types import DEFAULT_VARIANT

EPISODE, TARGET = "episode", "target"  # plan's units of work: an episode played, a bank entry read in a mode


@dataclass(frozen=True)
class Unit:
    """What a stage's plan rates are per, and the table holding one row per unit a run did (its
    default variant's, where the table has variants): a pilot's rates are measured against them."""
    kind: str  # EPISODE or TARGET
    table: str


@dataclass(frozen=True, eq=False)  # each stage is one object: keyed by identity
class Stage:
    name: str  # the command, and the stage's name in `plan --stages`, `cost` and a shard's record
    # The first part of the artifact names its call uses are recorded under (call_uses.artifact).
    prefixes: tuple[str, ...]
    # The artifact tables it writes, each with the key replay compares its rows in; a stage whose
    # rows belong to benchmarks, not runs (judge-check: store/judges.py CONTROL_TABLES), has none.
    tables: dict[str, tuple[str, ...]]
    batchable: bool  # its calls can wait for a batch (`--batch`, `--batch-file`)
    shardable: bool  # its work splits into (system, user) cells (`--shard`)
    # `plan`'s first estimate, per unit of its work and role: (calls, prompt tokens per call,
    # completion tokens per call); {}: plan does not estimate the stage.
    rates: dict[str, tuple[float, int, int]] = field(default_factory=dict)
    unit: Unit | None = None  # what `rates` are per
    variants: bool = False  # its artifacts are a scoring variant's (any but the default)


# Rough first-estimate rates, replaced by a pilot store's: the published study's C ≈ 2.5 assistant
# replies per episode (one simulator and one preference-judge call each), prompts the size of a
# mid-length dialogue, and attribution asked for the ≈ 45 % of targets scored below 0.75.
ROLLOUT = Stage("rollout", ("episode",), {
    "episodes": ("run", "user_id", "task_idx"),
    "turns": ("run", "user_id", "task_idx", "turn"),
    "turn_changes": ("run", "user_id", "dimension", "version"),
    "snapshots": ("run", "user_id", "task_idx"),
}, batchable=False, shardable=True,
    rates={AGENT: (2.5, 1500, 350), SIMULATOR: (2.5, 2200, 120), PREF_JUDGE: (2.5, 700, 80)},
    unit=Unit(EPISODE, "episodes"))
SCORE = Stage("score", ("recon", "evolving"), {
    "score_passes": ("run", "mode", "k", "variant"),
    "reconstructions": ("run", "mode", "k", "variant", "user_id", "dimension"),
    "evolving_judgments": ("run", "mode", "k", "variant", "user_id", "dimension", "criterion", "version"),
    "judge_verdicts": ("run", "mode", "k", "variant", "user_id", "dimension", "judge", "repeat"),
}, batchable=True, shardable=True, rates={SLOT_FILL: (1.0, 2000, 40), RECOVERY_JUDGE: (1.0, 350, 40)},
    unit=Unit(TARGET, "reconstructions"))
# A rescoring variant's rows go to score's tables, under the variant's name.
RESCORE = Stage("rescore", SCORE.prefixes, {}, batchable=True, shardable=False, variants=True)
ATTRIBUTE = Stage("attribute", ("attr",), {
    "attributions": ("run", "mode", "k", "variant", "user_id", "dimension"),
}, batchable=True, shardable=True,
    rates={ORACLE: (0.45, 500, 60), DISCLOSURE: (0.4, 6000, 80), ELICITATION: (0.2, 6000, 80)},
    unit=Unit(TARGET, "attributions"))
UTILIZATION = Stage("utilization", ("act",), {
    "utilization_passes": ("run", "k"),
    "act_cases": ("run", "k", "user_id", "dimension"),
}, batchable=False, shardable=True)
JUDGE_CHECK = Stage("judge-check", (), {}, batchable=True, shardable=True)

# In pipeline order: replay re-executes them in it (attribution reads the scores, Know/Act the
# reconstructions), and a plan lists its stages in it.
STAGES = (ROLLOUT, SCORE, RESCORE, ATTRIBUTE, UTILIZATION, JUDGE_CHECK)
BY_NAME = {stage.name: stage for stage in STAGES}
PLANNED = tuple(stage for stage in STAGES if stage.rates)  # what `plan --stages` picks from


def stage_of(artifact: str) -> Stage | None:
    """The stage that recorded a call use under `artifact` (`recon:dump_all:0:default:u:d` ->
    SCORE, the same with another variant -> RESCORE); None for a prefix no stage declares."""
    parts = artifact.split(":")
    found = [stage for stage in STAGES if parts[0] in stage.prefixes]
    if len(found) > 1:  # a scoring artifact (`<prefix>:<mode>:<k>:<variant>:…`): which variant's
        other = len(parts) > 3 and parts[3] != DEFAULT_VARIANT
        found = [stage for stage in found if stage.variants == other]
    return found[0] if found else None
