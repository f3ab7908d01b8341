"""Disclosing the changes of an evolving bank during a rollout.

The simulated user always plays the bank valid at the current task (bench/history.py `user_at`).
A change (a version taking effect after task 1) is disclosed once: in the first episode at or after
its `valid_from_task`, the simulator is told about it on its next turn and asked to mention it where
it fits (prompts/simulator_change.md). That turn records the change event `{dimension, version}`.
A change whose episode ended before a real user turn (a failed assistant, a fallback reply) stays
pending for the next turn or episode. The assistant and the memory system see only what the user
says: never the bank, the note or the event. Nothing here runs for a static bank."""
from __future__ import annotations

from memaudit.bench.history import Change, changes
from memaudit.prompts import load_prompt
from memaudit.types import Episode, User

NOTE_PROMPT = "simulator_change"


class Disclosures:
    """The changes of one user in one run, and which of them a turn has already disclosed."""

    def __init__(self, user: User, disclosed: set[tuple[str, int]]):
        self.all = changes(user)
        self.disclosed = set(disclosed)

    @classmethod
    async def load(cls, store, run: str, user: User) -> "Disclosures":
        found = set()
        if changes(user):
            found = await store.episodes.disclosed_changes(run, user.id)
        return cls(user, found)

    def pending(self, task_index: int) -> list[Change]:
        return [c for c in self.all if c.valid_from_task <= task_index
                and (c.dimension, c.version) not in self.disclosed]

    def record(self, ep: Episode) -> None:
        self.disclosed |= {(t.change["dimension"], t.change["version"]) for t in ep.turns if t.change}


def change_note(prompts_dir, user: User, change: Change) -> str:
    """The note added to the simulator's message on the turn that discloses `change`."""
    entry = next(e for e in user.bank if e.dimension == change.dimension)
    now = entry.history[change.version]
    before = entry.history[change.version - 1].short if change.version > 0 else "nothing (this is new about you)"
    prompt = load_prompt(NOTE_PROMPT, prompts_dir)
    return prompt.render(dimension=change.dimension, before=before, after=now.short,
                         explanation=now.explanation or entry.explanation)[-1]["content"]


def event(change: Change) -> dict:
    return {"dimension": change.dimension, "version": change.version}
