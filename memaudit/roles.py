"""The role registry, the one place that states the facts of a role.

A role group is what a config file configures (`[roles.<name>]`): an endpoint, a model, and on
the embedded model an output cap. It belongs to one phase of the work (dialogue, memory, scoring,
…; a "stage" is a command of the pipeline: memaudit/stages.py). A call role (`ROLE_SPECS`)
names its group, its phase, its prompt file, its output schema, its default temperature and
max_tokens; config, provenance, the rollout, scoring, attribution and utilization read them here.
Memory adapters declare their own sub-roles (`memory:<name>`) next to their code, in the `memory`
group. `memaudit/ask.py` renders a role's prompt and calls the model: the one path of a role call.
Per-role TOML config overrides temperature and max_tokens (see memaudit/config.py). Schemas are
written so that strict structured-output modes accept them (every property required, no extras).
This module imports no model client: the tables and the report may read it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from memaudit.types import FEEDBACK_TYPES, RUBRIC


def obj(**props) -> dict:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


STR = {"type": "string"}
NONEMPTY = {"type": "string", "minLength": 1}
# Bounded free-text fields of the judges' short answers: grammar-constrained servers (llama.cpp)
# stop the string at the bound instead of running into max_tokens and leaving cut-off JSON.
# Checked locally for every backend. What a simulated user says is never bounded (PROTOCOL.md §11).
REASON = {"type": "string", "maxLength": 240}
LABEL = {"type": "string", "minLength": 1, "maxLength": 150}
BOOL = {"type": "boolean"}


def _on_rubric(data) -> str | None:
    return None if RUBRIC.on_grid(data["score"]) else f"score must be exactly one of {list(RUBRIC.scores)}"


# The names of the roles and phases: every other module imports them, none retypes them (a typo is
# an ImportError, not a role that silently matches nothing). Plain strings: what reaches a request,
# a cache key, a config file or the store is the name itself.
# Role groups (`[roles.<name>]` in a config file) ...
AGENT = "agent"
SIMULATOR = "simulator"
PREF_JUDGE = "pref_judge"
MEMORY = "memory"  # a memory system's own calls are `memory:<name>` (role_group)
MEMT_POLICY = "memt_policy"
SLOT_FILL = "slot_fill"
RECOVERY_JUDGE = "recovery_judge"
ATTRIBUTION = "attribution"
GENERATOR = "generator"
# ... and the call roles that fall under a group of another name.
ORACLE = "oracle"
DISCLOSURE = "disclosure"
ELICITATION = "elicitation"
PERSONA_GEN = "persona_gen"
BANK_GEN = "bank_gen"
TASK_GEN = "task_gen"
CRITIC = "critic"
EDITOR = "editor"
ACT_SCENARIO = "act_scenario"
ACT_JUDGE = "act_judge"
CONTROL_WRITER = "control_writer"
# The phases of the work a role group belongs to; dialogue and memory run in the rollout.
PHASES = (DIALOGUE_PHASE, MEMORY_PHASE, SCORING_PHASE, ATTRIBUTION_PHASE, UTILIZATION_PHASE, GENERATION_PHASE) = (
    "dialogue", "memory", "scoring", "attribution", "utilization", "generation")


@dataclass(frozen=True)
class RoleGroup:
    name: str
    phase: str  # one of PHASES
    embedded_max_tokens: int | None  # the cap on the embedded model; None: no cap


# Output budgets on the embedded 135M model (2 CPU cores generate a few dozen tokens a second):
# caps, not targets — a role asking for less keeps its own value. Configure max_tokens per role
# to lift them.
GROUPS: dict[str, RoleGroup] = {g.name: g for g in (
    RoleGroup(AGENT, DIALOGUE_PHASE, 160),
    RoleGroup(SIMULATOR, DIALOGUE_PHASE, 128),
    RoleGroup(PREF_JUDGE, DIALOGUE_PHASE, 160),
    RoleGroup(MEMORY, MEMORY_PHASE, 256),
    RoleGroup(MEMT_POLICY, MEMORY_PHASE, None),
    RoleGroup(SLOT_FILL, SCORING_PHASE, 160),
    RoleGroup(RECOVERY_JUDGE, SCORING_PHASE, 96),
    RoleGroup(ATTRIBUTION, ATTRIBUTION_PHASE, 192),
    RoleGroup(GENERATOR, GENERATION_PHASE, 1024),
)}


@dataclass(frozen=True)
class RoleSpec:
    prompt: str | None
    schema: dict | None
    temperature: float
    max_tokens: int | None  # None: the model's own limit, as the published runner sent none
    check: Callable | None = None
    # The configured group it falls under and the phase it is called in (PHASES). None for a memory
    # system's own sub-role spec (adapters/memory_calls.py): its call role names its group.
    group: str | None = None
    phase: str | None = None


def _spec(name: str, group: str, phase: str, schema: dict | None, temperature: float, max_tokens: int | None,
          check: Callable | None = None) -> RoleSpec:
    return RoleSpec(name, schema, temperature, max_tokens, check, group, phase)


# No role of the published study sends an output cap, like the published runner: a cap would change
# what the assistant says, what the simulated user discloses and what a judge can answer. The
# embedded model's caps (GROUPS) apply to the embedded model only.
ROLE_SPECS: dict[str, RoleSpec] = {
    AGENT: _spec(AGENT, AGENT, DIALOGUE_PHASE, None, 0.7, None),
    SIMULATOR: _spec(SIMULATOR, SIMULATOR, DIALOGUE_PHASE,
                     obj(feedback_type={"type": "string", "enum": list(FEEDBACK_TYPES)}, text=NONEMPTY), 0.85, None),
    # schema per call: rollout/pref_judge.py
    PREF_JUDGE: _spec(PREF_JUDGE, PREF_JUDGE, DIALOGUE_PHASE, None, 0.0, None),
    SLOT_FILL: _spec(SLOT_FILL, SLOT_FILL, SCORING_PHASE, obj(label=LABEL, reason=REASON), 0.0, None),
    RECOVERY_JUDGE: _spec(RECOVERY_JUDGE, RECOVERY_JUDGE, SCORING_PHASE,
                          obj(score={"type": "number"}, reason=REASON), 0.0, None, _on_rubric),
    ORACLE: _spec(ORACLE, ATTRIBUTION, ATTRIBUTION_PHASE, obj(can_invite=BOOL, reason=REASON), 0.0, None),
    DISCLOSURE: _spec(DISCLOSURE, ATTRIBUTION, ATTRIBUTION_PHASE,
                      obj(disclosed=BOOL, evidence=REASON, reason=REASON), 0.0, None),
    # Stage 2 answers with a letter, A (the assistant never steered there) or B (the user did not
    # elaborate), as the published step did: memaudit/scoring/attribution.py maps it to the label.
    ELICITATION: _spec(ELICITATION, ATTRIBUTION, ATTRIBUTION_PHASE,
                       obj(category={"type": "string", "enum": ["A", "B"]}, reason=REASON, evidence=REASON), 0.0,
                       None),
    # schema set by memaudit/bench/generate.py
    PERSONA_GEN: _spec(PERSONA_GEN, GENERATOR, GENERATION_PHASE, None, 0.9, None),
    BANK_GEN: _spec(BANK_GEN, GENERATOR, GENERATION_PHASE, None, 0.7, None),
    TASK_GEN: _spec(TASK_GEN, GENERATOR, GENERATION_PHASE, obj(task=NONEMPTY, rationale=STR), 0.7, None),
    CRITIC: _spec(CRITIC, GENERATOR, GENERATION_PHASE,
                  obj(guessed_trait=STR, verdict={"type": "string", "enum": ["neutral", "fishing"]}, reason=STR),
                  0.0, None),
    EDITOR: _spec(EDITOR, GENERATOR, GENERATION_PHASE, obj(task=NONEMPTY, rationale=STR), 0.5, None),
    # Know/Act utilization (memaudit/utilization/): scenario writing (schema set by the generator)
    # and the blind pairwise judge, asked once per answer order.
    ACT_SCENARIO: _spec(ACT_SCENARIO, GENERATOR, GENERATION_PHASE, None, 0.8, 300),
    ACT_JUDGE: _spec(ACT_JUDGE, RECOVERY_JUDGE, UTILIZATION_PHASE,
                     obj(shaped={"type": "string", "enum": ["first", "second", "neither"]}, reason=REASON),
                     0.0, 160),
    # judge-check (memaudit/scoring/judge_check.py): a paraphrase, a vague non-answer and the reversed
    # value of one bank entry, written once and cached.
    CONTROL_WRITER: _spec(CONTROL_WRITER, GENERATOR, GENERATION_PHASE,
                          obj(paraphrase=LABEL, non_answer=LABEL, reversed=LABEL), 0.7, 300),
}


def role_group(role: str) -> str:
    """`memory:mem0_extract` -> `memory`; `oracle` -> `attribution`; a group names itself."""
    base = role.split(":", 1)[0]
    spec = ROLE_SPECS.get(base)
    return spec.group if spec is not None else base


def groups_of(*phases: str) -> tuple[str, ...]:
    """The role groups of these phases, in registry order."""
    return tuple(name for name, group in GROUPS.items() if group.phase in phases)


def prompts_of(phase: str) -> tuple[str, ...]:
    """The prompt files of the roles called in a phase, in registry order."""
    return tuple(spec.prompt for spec in ROLE_SPECS.values() if spec.phase == phase and spec.prompt)


def embedded_max_tokens() -> dict[str, int]:
    """Role group -> its output cap on the embedded model (the groups that have one)."""
    return {name: g.embedded_max_tokens for name, g in GROUPS.items() if g.embedded_max_tokens is not None}
