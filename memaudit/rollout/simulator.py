"""The simulated user: speaks as one persona with its whole hidden bank, labels each reaction
with a feedback type, and falls back to a recorded placeholder when its output stays invalid."""
from __future__ import annotations

from dataclasses import dataclass

from memaudit.ask import ask
from memaudit.config import EMBEDDED_SIMULATOR_TEXT_CHARS
from memaudit.errors import InvalidOutput
from memaudit.llm.client import LLM
from memaudit.prompts import load_prompt, rollout_layout
from memaudit.roles import ROLE_SPECS, SIMULATOR
from memaudit.published.layout import simulator_values
from memaudit.store import dumps_indented
from memaudit.types import CATEGORIES, Task, User

RECENT_REPLIES = 3
# Stands in for a user message the simulator could not produce; the turn is flagged `fallback`
# so no table mistakes it for a real reaction.
FALLBACK_TEXT = "[no valid simulator reply] Please continue."


@dataclass(frozen=True)
class UserReply:
    feedback_type: str
    text: str
    fallback: bool = False

    @property
    def satisfied(self) -> bool:
        return self.feedback_type == "satisfied"


def bank_json(user: User) -> dict:
    """The bank as the published simulator read it: entries grouped by category."""
    return {category: [{"dimension": e.dimension, "short": e.short, "explanation": e.explanation}
                       for e in user.entries(category)]
            for category in CATEGORIES if user.entries(category)}



def reply_schema(llm: LLM) -> dict:
    """The simulator's output schema. Its text is unbounded, except on the embedded demo model,
    whose grammar must stop the string before the token cap cuts the JSON (a demo-only cut)."""
    schema = ROLE_SPECS[SIMULATOR].schema
    if not llm.settings.on_embedded(SIMULATOR):
        return schema
    bounded = {**schema["properties"]["text"], "maxLength": EMBEDDED_SIMULATOR_TEXT_CHARS}
    return {**schema, "properties": {**schema["properties"], "text": bounded}}


def render_conversation(task: str, exchanges: list[tuple[str, str | None]]) -> str:
    """`exchanges` = [(assistant reply, user message or None for the pending one)], oldest first."""
    lines = [f"You: {task}"]
    for reply, user_text in exchanges:
        lines.append(f"Assistant: {reply}")
        if user_text is not None:
            lines.append(f"You: {user_text}")
    return "\n\n".join(lines)


def _says_something(data) -> str | None:
    return None if data["text"].strip() else "the text must not be blank"


async def respond(llm: LLM, user: User, task: Task, exchanges: list[tuple[str, str | None]],
                  turn: int, *, change_note: str | None = None) -> UserReply:
    """The user's reaction to the latest assistant reply (the last exchange's reply).
    `change_note` (evolving banks, rollout/changes.py) is added to the end of the user message.
    ContextOverflow and EndpointError propagate; invalid output becomes a recorded fallback."""
    layout = rollout_layout(llm.settings.prompts_dir)
    if layout is not None:  # the published pack: its request layout (published/layout.py)
        values = simulator_values(layout, user.persona, bank_json(user), task.text, exchanges, turn)
    else:
        own = [text for _, text in exchanges if text is not None][-RECENT_REPLIES:]
        values = dict(persona=dumps_indented(user.persona), bank=dumps_indented(bank_json(user)), task=task.text,
                      conversation=render_conversation(task.text, exchanges), turn=turn,
                      recent_replies="\n".join(f"- {t}" for t in own) or "(none yet)")
    messages = None
    if change_note is not None:
        messages = load_prompt(ROLE_SPECS[SIMULATOR].prompt, llm.settings.prompts_dir).render(**values)
        messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{change_note}"}
    try:
        result = await ask(llm, SIMULATOR, seed_parts=(user.id, task.index, turn), check=_says_something,
                           schema=reply_schema(llm), messages=messages, **values)
    except InvalidOutput:
        return UserReply("followup", FALLBACK_TEXT, fallback=True)
    return UserReply(result.data["feedback_type"], result.data["text"].strip())
