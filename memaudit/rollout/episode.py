"""One episode: the task is sent, then turns of assistant reply -> preference judge -> simulated
user -> record, until the user is satisfied or the reply budget is spent.

When memory is read and written is decided in one place, `EpisodeMemory`, in the published
runner's order (PROTOCOL.md §11): on every turn memory is read with the latest user message (the
task on turn 1), the assistant replies, and only then is that message stored, followed by the
reply. The store never holds the message being answered. The episode's last user message is
offered after the episode. The live loop (`run_episode`) and a replayer of recorded transcripts
(`feed_transcript`) both drive memory through it, so they cannot disagree on the order."""
from __future__ import annotations

from memaudit.adapters.base import AgentContext, Event, MemoryAdapter
from memaudit.bench.history import Change, user_at
from memaudit.errors import ContextOverflow, InvalidOutput
from memaudit.llm.client import LLM
from memaudit.rollout.assistant import reply as assistant_reply
from memaudit.rollout.changes import change_note, event
from memaudit.rollout.pref_judge import judge_reply
from memaudit.rollout.simulator import respond
from memaudit.types import Episode, Task, Turn, User


class EpisodeMemory:
    """The adapter calls of one episode, in order. Per turn t:

        read()            adapter.context(latest user message, k)  -- the task on turn 1
        (the assistant replies)
        replied(t, text)  observe(the message just answered: task_start on turn 1, else the
                          user message of turn t-1), then observe(assistant reply of turn t)
        user_said(t, ..)  the user's answer: next turn's query, stored after the next reply
    after the last turn:
        end(turns)        observe(the last user message not yet stored), observe(episode_end)

    A placeholder standing in for an invalid simulator output is shown to the assistant (it is
    the conversation) but never stored: it is not something the user said."""

    def __init__(self, adapter: MemoryAdapter, task: Task, k: int):
        self.adapter, self.task_index, self.k = adapter, task.index, k
        self.query = task.text
        self.unstored: Event | None = Event("task_start", task.text, task.index, 0)

    async def read(self) -> AgentContext:
        return await self.adapter.context(self.query, self.k)

    async def replied(self, turn: int, text: str) -> None:
        await self._store_unstored()
        await self.adapter.observe(Event("assistant", text, self.task_index, turn))

    def user_said(self, turn: int, text: str, *, placeholder: bool = False) -> None:
        self.query = text
        self.unstored = None if placeholder else Event("user", text, self.task_index, turn)

    async def end(self, turns: int) -> None:
        await self._store_unstored()
        await self.adapter.observe(Event("episode_end", "", self.task_index, turns))

    async def _store_unstored(self) -> None:
        if self.unstored is not None:
            event, self.unstored = self.unstored, None
            await self.adapter.observe(event)


async def feed_transcript(adapter: MemoryAdapter, task: Task, turns: list[Turn], *, k: int) -> None:
    """Drive a memory system through a recorded episode exactly as the live loop did: the same
    reads and writes in the same order, with the recorded replies and user messages."""
    memory = EpisodeMemory(adapter, task, k)
    for turn in turns:
        await memory.read()
        await memory.replied(turn.index, turn.assistant)
        if turn.user_text is not None:
            memory.user_said(turn.index, turn.user_text, placeholder=turn.fallback)
    await memory.end(len(turns))


async def run_episode(llm: LLM, adapter: MemoryAdapter, user: User, task: Task, *, run: str,
                      max_turns: int, k: int, pending: list[Change] = ()) -> Episode:
    """`pending`: bank changes to disclose, one per user turn, in order (rollout/changes.py)."""
    notes = [(change, change_note(llm.settings.prompts_dir, user, change)) for change in pending]
    user = user_at(user, task.index)  # the person as they are at this task (the same user when static)
    prefs = user.entries("assistance_preference")
    memory = EpisodeMemory(adapter, task, k)
    turns: list[Turn] = []
    exchanges: list[tuple[str, str]] = []
    end_reason, error = "max_turns", None
    for turn in range(1, max_turns + 1):
        seed_parts = (user.id, task.index, turn)
        context = await memory.read()
        try:
            answer = await assistant_reply(llm, task.text, exchanges, context, seed_parts=seed_parts,
                                           prompt=adapter.reply_prompt, system=adapter.name)
        except (InvalidOutput, ContextOverflow) as exc:
            end_reason, error = "failed", f"assistant: {exc}"
            break
        await memory.replied(turn, answer)
        preference = await judge_reply(llm, prefs, task.text, answer, seed_parts=seed_parts)
        try:
            user_reply = await respond(llm, user, task, [*exchanges, (answer, None)], turn,
                                       change_note=notes[0][1] if notes else None)
        except ContextOverflow as exc:
            turns.append(Turn(turn, answer, None, None, preference.score, preference.per_pref))
            end_reason, error = "failed", f"simulator: {exc}"
            break
        memory.user_said(turn, user_reply.text, placeholder=user_reply.fallback)
        disclosed = event(notes.pop(0)[0]) if notes and not user_reply.fallback else None
        turns.append(Turn(turn, answer, user_reply.feedback_type, user_reply.text, preference.score,
                          preference.per_pref, user_reply.fallback, disclosed))
        if user_reply.satisfied:
            end_reason = "satisfied"
            break
        exchanges.append((answer, user_reply.text))
    await memory.end(len(turns))
    return Episode(run, user.id, task.index, task.text, turns, end_reason, error)
