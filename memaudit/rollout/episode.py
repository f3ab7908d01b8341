"""One episode: the task is sent, then turns of assistant reply -> preference judge -> simulated
user -> record, until the user is satisfied or the reply budget is spent. The memory adapter
observes the task, every reply and every real user message, and the episode's end."""
from __future__ import annotations

from memaudit.adapters.base import Event, MemoryAdapter
from memaudit.errors import ContextOverflow, InvalidOutput
from memaudit.llm.client import LLM
from memaudit.rollout.assistant import reply as assistant_reply
from memaudit.rollout.pref_judge import judge_reply
from memaudit.rollout.simulator import respond
from memaudit.types import Episode, Task, Turn, User


async def run_episode(llm: LLM, adapter: MemoryAdapter, user: User, task: Task, *, run: str,
                      max_turns: int, k: int) -> Episode:
    prefs = user.entries("assistance_preference")
    turns: list[Turn] = []
    exchanges: list[tuple[str, str]] = []
    end_reason, error = "max_turns", None
    await adapter.observe(Event("task_start", task.text, task.index, 0))
    for turn in range(1, max_turns + 1):
        seed_parts = (user.id, task.index, turn)
        latest = exchanges[-1][1] if exchanges else task.text
        context = await adapter.context(latest, k)
        try:
            answer = await assistant_reply(llm, task.text, exchanges, context, seed_parts=seed_parts)
        except (InvalidOutput, ContextOverflow) as exc:
            end_reason, error = "failed", f"assistant: {exc}"
            break
        await adapter.observe(Event("assistant", answer, task.index, turn))
        preference = await judge_reply(llm, prefs, task.text, answer, seed_parts=seed_parts)
        try:
            user_reply = await respond(llm, user, task, [*exchanges, (answer, None)], turn)
        except ContextOverflow as exc:
            turns.append(Turn(turn, answer, None, None, preference.score, preference.per_pref))
            end_reason, error = "failed", f"simulator: {exc}"
            break
        if not user_reply.fallback:
            # A placeholder is not something the user said: memory must not learn from it.
            await adapter.observe(Event("user", user_reply.text, task.index, turn))
        turns.append(Turn(turn, answer, user_reply.feedback_type, user_reply.text, preference.score,
                          preference.per_pref, user_reply.fallback))
        if user_reply.satisfied:
            end_reason = "satisfied"
            break
        exchanges.append((answer, user_reply.text))
    await adapter.observe(Event("episode_end", "", task.index, len(turns)))
    return Episode(run, user.id, task.index, task.text, turns, end_reason, error)
