"""The assistant scaffold, identical for every memory system, shaped like the published one: a
generic personalised assistant whose system prompt carries what the memory returned, and one user
message holding the task and the conversation so far. It never sees the bank or the persona, and
nothing it reads names what is scored."""
from __future__ import annotations

from memaudit.adapters.base import AgentContext
from memaudit.ask import ask
from memaudit.llm.client import LLM
from memaudit.prompts import load_prompt, rollout_layout
from memaudit.roles import AGENT, ROLE_SPECS
from memaudit.published.layout import agent_layout, agent_memory, agent_message

NOTES_HEADER = "What you remember about this person from earlier conversations:"
PREAMBLE_HEADER = "Your standing notes about this person:"
CONVERSATION_HEADER = "Our conversation so far:"


def render_item(item) -> str:
    tags = item.fields.get("tags")
    suffix = f"  [tags: {', '.join(map(str, tags))}]" if isinstance(tags, list) and tags else ""
    return f"- {item.content}{suffix}"


def render_memory(context: AgentContext) -> str:
    """The memory section of the system prompt; "" when memory returned nothing, as published."""
    blocks = []
    if context.preamble:
        blocks.append(f"{PREAMBLE_HEADER}\n{context.preamble}")
    if context.notes:
        blocks.append("\n".join([NOTES_HEADER, *(render_item(item) for item in context.notes)]))
    return "".join(f"{block}\n\n" for block in blocks)


def render_message(task: str, exchanges: list[tuple[str, str]]) -> str:
    """The task, then (after the first turn) the whole conversation so far, as one user message."""
    if not exchanges:
        return task
    lines = [f"Assistant: {reply}\nUser: {user_text}" for reply, user_text in exchanges]
    return "\n\n".join([task, "\n".join([CONVERSATION_HEADER, *lines])])


def reply_messages(llm: LLM, task: str, exchanges: list[tuple[str, str]], context: AgentContext,
                   prompt: str = ROLE_SPECS[AGENT].prompt, system: str | None = None) -> list[dict]:
    """System prompt with the memory section, replayed earlier conversations (if the memory system
    keeps them), then the task and the conversation so far. `prompt`: the system's prompt file
    (`MemoryAdapter.reply_prompt`). With a published pack, the published assistant of `system`
    (its own prompt file, memory lines and conversation layout: published/layout.py)."""
    layout = rollout_layout(llm.settings.prompts_dir)
    published = agent_layout(layout, system) if system else None
    history = context.history
    if published is None:
        values = {"memory": render_memory(context), "message": render_message(task, exchanges)}
    else:
        prompt = published["prompt"]
        values = {"memory": agent_memory(published, context.notes), "message": agent_message(layout, task, exchanges)}
        history = [m for n, m in enumerate(history) if n not in context.published_omits]
    first, final = load_prompt(prompt, llm.settings.prompts_dir).render(**values)
    return [first, *history, final]


async def reply(llm: LLM, task: str, exchanges: list[tuple[str, str]], context: AgentContext, *,
                seed_parts: tuple, prompt: str = ROLE_SPECS[AGENT].prompt, system: str | None = None) -> str:
    """The assistant's next reply. `exchanges` = [(assistant reply, user message)] so far.
    InvalidOutput / ContextOverflow / EndpointError propagate to the episode loop."""
    result = await ask(llm, AGENT, messages=reply_messages(llm, task, exchanges, context, prompt, system),
                       seed_parts=seed_parts)
    return result.text.strip()
