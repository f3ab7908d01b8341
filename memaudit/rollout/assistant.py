"""The assistant scaffold, identical for every memory system: the task, the conversation so far
and what the memory returned. It never sees the bank or the persona."""
from __future__ import annotations

from memaudit.adapters.base import AgentContext
from memaudit.llm.client import LLM
from memaudit.prompts import load_prompt
from memaudit.roles import ROLE_SPECS, ask

NO_NOTES = "[Memory] Nothing relevant from earlier conversations."
PREAMBLE_HEADER = "Your standing memory of this person (always available):"


def render_notes(context: AgentContext) -> str:
    if not context.notes:
        return NO_NOTES
    lines = ["[Memory] Notes from earlier conversations with this person (may be incomplete):"]
    for item in context.notes:
        lines.append(f"- {item.content}")
    return "\n".join(lines)


def reply_messages(llm: LLM, task: str, exchanges: list[tuple[str, str]], context: AgentContext) -> list[dict]:
    """System prompt, replayed history, the task and the conversation as chat messages; the
    memory notes ride on the latest user message only, so everything before it stays a stable
    prefix the server can reuse from turn to turn."""
    latest = exchanges[-1][1] if exchanges else task
    rendered = load_prompt(ROLE_SPECS["agent"].prompt, llm.settings.prompts_dir).render(
        preamble=f"{PREAMBLE_HEADER}\n{context.preamble}" if context.preamble else "", memory=render_notes(context), message=latest)
    system, final = rendered[0], rendered[-1]
    messages = [system, *context.history]
    if exchanges:
        messages.append({"role": "user", "content": task})
        for i, (reply, user_text) in enumerate(exchanges):
            messages.append({"role": "assistant", "content": reply})
            if i < len(exchanges) - 1:
                messages.append({"role": "user", "content": user_text})
    messages.append(final)
    return messages


async def reply(llm: LLM, task: str, exchanges: list[tuple[str, str]], context: AgentContext, *,
                seed_parts: tuple) -> str:
    """The assistant's next reply. `exchanges` = [(assistant reply, user message)] so far.
    InvalidOutput / ContextOverflow / EndpointError propagate to the episode loop."""
    result = await ask(llm, "agent", messages=reply_messages(llm, task, exchanges, context), seed_parts=seed_parts)
    return result.text.strip()
