"""The role registry, the one place that states the facts of a role.

A role group is what a config file configures (`[roles.<name>]`): an endpoint, a model, and on
the embedded model an output cap. It belongs to one pipeline stage. A call role (`ROLE_SPECS`)
names its group, its stage, its prompt file, its output schema, its default temperature and
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


@dataclass(frozen=True)
class RoleGroup:
    name: str
    stage: str  # dialogue and memory run in the rollout; see STAGES
    embedded_max_tokens: int | None  # the cap on the embedded model; None: no cap


STAGES = ("dialogue", "memory", "scoring", "attribution", "utilization", "generation")
# Output budgets on the embedded 135M model (2 CPU cores generate a few dozen tokens a second):
# caps, not targets — a role asking for less keeps its own value. Configure max_tokens per role
# to lift them.
GROUPS: dict[str, RoleGroup] = {g.name: g for g in (
    RoleGroup("agent", "dialogue", 160),
    RoleGroup("simulator", "dialogue", 128),
    RoleGroup("pref_judge", "dialogue", 160),
    RoleGroup("memory", "memory", 256),
    RoleGroup("memt_policy", "memory", None),
    RoleGroup("slot_fill", "scoring", 160),
    RoleGroup("recovery_judge", "scoring", 96),
    RoleGroup("attribution", "attribution", 192),
    RoleGroup("generator", "generation", 1024),
)}


@dataclass(frozen=True)
class RoleSpec:
    prompt: str | None
    schema: dict | None
    temperature: float
    max_tokens: int | None  # None: the model's own limit, as the published runner sent none
    check: Callable | None = None
    # The configured group it falls under and the stage that calls it (STAGES). None for a memory
    # system's own sub-role spec (adapters/memory_calls.py): its call role names its group.
    group: str | None = None
    stage: str | None = None


def _spec(name: str, group: str, stage: str, schema: dict | None, temperature: float, max_tokens: int | None,
          check: Callable | None = None) -> RoleSpec:
    return RoleSpec(name, schema, temperature, max_tokens, check, group, stage)


# No role of the published study sends an output cap, like the published runner: a cap would change
# what the assistant says, what the simulated user discloses and what a judge can answer. The
# embedded model's caps (GROUPS) apply to the embedded model only.
ROLE_SPECS: dict[str, RoleSpec] = {
    "agent": _spec("agent", "agent", "dialogue", None, 0.7, None),
    "simulator": _spec("simulator", "simulator", "dialogue",
                       obj(feedback_type={"type": "string", "enum": list(FEEDBACK_TYPES)}, text=NONEMPTY), 0.85, None),
    # schema per call: rollout/pref_judge.py
    "pref_judge": _spec("pref_judge", "pref_judge", "dialogue", None, 0.0, None),
    "slot_fill": _spec("slot_fill", "slot_fill", "scoring", obj(label=LABEL, reason=REASON), 0.0, None),
    "recovery_judge": _spec("recovery_judge", "recovery_judge", "scoring",
                            obj(score={"type": "number"}, reason=REASON), 0.0, None, _on_rubric),
    "oracle": _spec("oracle", "attribution", "attribution", obj(can_invite=BOOL, reason=REASON), 0.0, None),
    "disclosure": _spec("disclosure", "attribution", "attribution",
                        obj(disclosed=BOOL, evidence=REASON, reason=REASON), 0.0, None),
    # Stage 2 answers with a letter, A (the assistant never steered there) or B (the user did not
    # elaborate), as the published stage did: memaudit/scoring/attribution.py maps it to the label.
    "elicitation": _spec("elicitation", "attribution", "attribution",
                         obj(category={"type": "string", "enum": ["A", "B"]}, reason=REASON, evidence=REASON), 0.0,
                         None),
    # schema set by memaudit/bench/generate.py
    "persona_gen": _spec("persona_gen", "generator", "generation", None, 0.9, None),
    "bank_gen": _spec("bank_gen", "generator", "generation", None, 0.7, None),
    "task_gen": _spec("task_gen", "generator", "generation", obj(task=NONEMPTY, rationale=STR), 0.7, None),
    "critic": _spec("critic", "generator", "generation",
                    obj(guessed_trait=STR, verdict={"type": "string", "enum": ["neutral", "fishing"]}, reason=STR),
                    0.0, None),
    "editor": _spec("editor", "generator", "generation", obj(task=NONEMPTY, rationale=STR), 0.5, None),
    # Know/Act utilization (memaudit/utilization/): scenario writing (schema set by the generator)
    # and the blind pairwise judge, asked once per answer order.
    "act_scenario": _spec("act_scenario", "generator", "generation", None, 0.8, 300),
    "act_judge": _spec("act_judge", "recovery_judge", "utilization",
                       obj(shaped={"type": "string", "enum": ["first", "second", "neither"]}, reason=REASON),
                       0.0, 160),
    # judge-check (memaudit/scoring/judge_check.py): a paraphrase, a vague non-answer and the reversed
    # value of one bank entry, written once and cached.
    "control_writer": _spec("control_writer", "generator", "generation",
                            obj(paraphrase=LABEL, non_answer=LABEL, reversed=LABEL), 0.7, 300),
}


def role_group(role: str) -> str:
    """`memory:mem0_extract` -> `memory`; `oracle` -> `attribution`; a group names itself."""
    base = role.split(":", 1)[0]
    spec = ROLE_SPECS.get(base)
    return spec.group if spec is not None else base


def groups_of(*stages: str) -> tuple[str, ...]:
    """The role groups of these stages, in registry order."""
    return tuple(name for name, group in GROUPS.items() if group.stage in stages)


def prompts_of(stage: str) -> tuple[str, ...]:
    """The prompt files of the roles a stage calls, in registry order."""
    return tuple(spec.prompt for spec in ROLE_SPECS.values() if spec.stage == stage and spec.prompt)


def embedded_max_tokens() -> dict[str, int]:
    """Role group -> its output cap on the embedded model (the groups that have one)."""
    return {name: g.embedded_max_tokens for name, g in GROUPS.items() if g.embedded_max_tokens is not None}
