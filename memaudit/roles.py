"""The role registry: role -> prompt file, output schema, default temperature and max_tokens.

`ask(llm, role, ...)` renders the role's prompt and calls the model through the shared client: the
one path of every role call (memory adapters pass their own spec for their sub-roles).
Per-role TOML config overrides temperature and max_tokens (see memaudit/config.py). Schemas are
written so that strict structured-output modes accept them (every property required, no extras).
Memory adapters declare their own sub-roles (`memory:<name>`) next to their code."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from memaudit.llm.client import LLM, CallResult
from memaudit.prompts import Prompt, load_prompt
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
    return None if data["score"] in RUBRIC else f"score must be exactly one of {list(RUBRIC)}"


@dataclass(frozen=True)
class RoleSpec:
    prompt: str
    schema: dict | None
    temperature: float
    max_tokens: int | None  # None: the model's own limit, as the published runner sent none
    check: Callable | None = None


# No role of the published study sends an output cap, like the published runner: a cap would change
# what the assistant says, what the simulated user discloses and what a judge can answer. The
# embedded model's caps (memaudit/config.py) apply to the embedded model only.
ROLE_SPECS: dict[str, RoleSpec] = {
    "agent": RoleSpec("agent", None, 0.7, None),
    "simulator": RoleSpec("simulator", obj(feedback_type={"type": "string", "enum": list(FEEDBACK_TYPES)},
                                           text=NONEMPTY), 0.85, None),
    "pref_judge": RoleSpec("pref_judge", None, 0.0, None),  # schema per call: rollout/pref_judge.py
    "slot_fill": RoleSpec("slot_fill", obj(label=LABEL, reason=REASON), 0.0, None),
    "recovery_judge": RoleSpec("recovery_judge", obj(score={"type": "number"}, reason=REASON), 0.0, None,
                               _on_rubric),
    "oracle": RoleSpec("oracle", obj(can_invite=BOOL, reason=REASON), 0.0, None),
    "disclosure": RoleSpec("disclosure", obj(disclosed=BOOL, evidence=REASON, reason=REASON), 0.0, None),
    # Stage 2 answers with a letter, A (the assistant never steered there) or B (the user did not
    # elaborate), as the published stage did: memaudit/scoring/attribution.py maps it to the label.
    "elicitation": RoleSpec("elicitation", obj(category={"type": "string", "enum": ["A", "B"]},
                                               reason=REASON, evidence=REASON), 0.0, None),
    "persona_gen": RoleSpec("persona_gen", None, 0.9, None),  # schema set by memaudit/bench/generate.py
    "bank_gen": RoleSpec("bank_gen", None, 0.7, None),
    "task_gen": RoleSpec("task_gen", obj(task=NONEMPTY, rationale=STR), 0.7, None),
    "critic": RoleSpec("critic", obj(guessed_trait=STR, verdict={"type": "string", "enum": ["neutral", "fishing"]},
                                     reason=STR), 0.0, None),
    "editor": RoleSpec("editor", obj(task=NONEMPTY, rationale=STR), 0.5, None),
    # Know/Act utilization (memaudit/utilization/): scenario writing (schema set by the generator)
    # and the blind pairwise judge, asked once per answer order.
    "act_scenario": RoleSpec("act_scenario", None, 0.8, 300),
    "act_judge": RoleSpec("act_judge", obj(shaped={"type": "string", "enum": ["first", "second", "neither"]},
                                           reason=REASON), 0.0, 160),
}


async def ask(llm: LLM, role: str, *, seed_parts: tuple = (), sample: int = 0, schema: dict | None = None,
              check: Callable | None = None, prompt: str | Prompt | None = None, messages: list[dict] | None = None,
              spec: RoleSpec | None = None, **values) -> CallResult:
    """Render `prompts/<role>.md` (or `prompt`: another prompt name, or a loaded Prompt) with `values`
    and call the model with the role's spec (`spec` for a role outside the registry). `messages`
    built by the caller (the agent's chat history) are sent instead of a rendered prompt."""
    spec = spec or ROLE_SPECS[role]
    if messages is None:
        if not isinstance(prompt, Prompt):
            prompt = load_prompt(prompt or spec.prompt, llm.settings.prompts_dir)
        messages = prompt.render(**values)
    return await llm.call(role, messages, temperature=spec.temperature, max_tokens=spec.max_tokens,
                          schema=schema if schema is not None else spec.schema, check=check or spec.check,
                          sample=sample, seed_parts=seed_parts)
