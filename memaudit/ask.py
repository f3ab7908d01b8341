"""`ask`: render a role's prompt (memaudit/prompts.py) and call the model through the shared
client with the role's spec from the registry (memaudit/roles.py): the one path of every role call
(memory adapters pass their own spec for their sub-roles)."""
from __future__ import annotations

from typing import Callable

from memaudit.llm.client import LLM, CallResult
from memaudit.prompts import Prompt, load_prompt
from memaudit.roles import ROLE_SPECS, RoleSpec


async def ask(llm: LLM, role: str, *, seed_parts: tuple = (), sample: int = 0, schema: dict | None = None,
              check: Callable | None = None, prompt: str | Prompt | None = None, messages: list[dict] | None = None,
              spec: RoleSpec | None = None, schema_name: str | None = None, repairs: int | None = None,
              **values) -> CallResult:
    """Render `prompts/<role>.md` (or `prompt`: another prompt name, or a loaded Prompt) with `values`
    and call the model with the role's spec (`spec` for a role outside the registry). `messages`
    built by the caller (the agent's chat history) are sent instead of a rendered prompt;
    `schema_name` names the schema in the request (default: the role); `repairs`: `LLM.call`."""
    spec = spec or ROLE_SPECS[role]
    if messages is None:
        if not isinstance(prompt, Prompt):
            prompt = load_prompt(prompt or spec.prompt, llm.settings.prompts_dir)
        messages = prompt.render(**values)
    return await llm.call(role, messages, temperature=spec.temperature, max_tokens=spec.max_tokens,
                          schema=schema if schema is not None else spec.schema, check=check or spec.check,
                          sample=sample, seed_parts=seed_parts, schema_name=schema_name, repairs=repairs)
