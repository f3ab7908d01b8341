"""The published request layout of the rollout roles, when the prompt directory is a published pack
(`memaudit prompts import-published`: memaudit/published/rollout.py wrote `rollout_layout.json`).

The pack's prompt files hold the published system prompts and user templates; the layout holds the
pieces those templates are filled from (memory lines, conversation lines, the simulator's recent
replies, the preference list). This module assembles them as the published runner did, so the
assistant, the simulated user and the preference judge send its request text byte for byte.
Without a layout nothing here is used and every request is memaudit's own."""
from __future__ import annotations

from pathlib import Path

from memaudit.canonical import dumps_indented
from memaudit.prompts import fill, rollout_layout
from memaudit.roles import AGENT, PREF_JUDGE, ROLE_SPECS, SIMULATOR
from memaudit.types import BankEntry, MemoryItem

# memaudit systems that stand for a published one (the mem0ai library is what published mem0 ran).
PUBLISHED_SYSTEM = {"mem0ai": "mem0"}


def agent_layout(layout: dict | None, system: str) -> dict | None:
    """The published assistant of `system` (None: no pack, or a system the study did not have)."""
    if layout is None:
        return None
    return layout[AGENT]["systems"].get(PUBLISHED_SYSTEM.get(system, system))


def published_prompts(prompts_dir: Path, system: str, used: tuple[str, ...]) -> tuple[str, ...]:
    """The pack's own assistant prompt file of `system`, when a run of it uses the assistant (`used`
    holds the rollout's prompts) and the pack has one: recorded with the run's prompt hashes."""
    agent = agent_layout(rollout_layout(Path(prompts_dir)), system)
    return (agent["prompt"],) if agent is not None and ROLE_SPECS[AGENT].prompt in used else ()


def agent_message(layout: dict, task: str, exchanges: list[tuple[str, str]]) -> str:
    """The task; after the first turn, the task followed by every exchange so far."""
    if not exchanges:
        return task
    agent = layout[AGENT]
    turns = agent["turn_sep"].join(fill(agent["turn"], {"agent": reply, "user": said}) for reply, said in exchanges)
    return fill(agent["message"], {"task": task, "conversation": turns})


def agent_memory(system: dict, notes: list[MemoryItem]) -> str:
    """The memory block of the system prompt ("" when nothing was retrieved, or for a system
    without one)."""
    if "memory_block" not in system:
        return ""
    lines = []
    for item in notes:
        if system["skip_empty"] and not item.content:
            continue
        tags = item.fields.get("tags") if isinstance(item.fields.get("tags"), list) else []
        shown = system.get("tags_sep", ", ").join(map(str, tags)) or system.get("tags_empty", "")
        lines.append(fill(system["item"], {"content": item.content, "tags": shown}))
    return fill(system["memory_block"], {"memories": system["item_sep"].join(lines)}) if lines else ""


def simulator_values(layout: dict, persona: dict, bank: dict, task: str,
                     exchanges: list[tuple[str, str | None]], turn: int) -> dict:
    """The values of the published simulator's user template. `exchanges` end with the reply being
    reacted to (its user message None)."""
    sim = layout[SIMULATOR]
    done = [(reply, said) for reply, said in exchanges if said is not None]
    history = sim["history_sep"].join(fill(sim["history_turn"], {"agent": reply, "user": said})
                                      for reply, said in done) if done else sim["history_empty"]
    recent = [said for _, said in done][-sim["recent_count"]:]
    lines = sim["recent_sep"].join(fill(sim["recent_line"], {"line": said}) for said in recent)
    section = fill(sim["recent_section"], {"recent": fill(sim["recent"], {"lines": lines})}) if recent else ""
    profile_key, bank_key = sim["profile_keys"]
    return {"profile": dumps_indented({profile_key: persona, bank_key: bank}), "task": task, "history": history,
            "recent_section": section, "turn": turn, "reply": exchanges[-1][0]}


def preference_values(layout: dict, prefs: list[BankEntry], task: str, reply: str) -> dict:
    judge = layout[PREF_JUDGE]
    listed = judge["preference_sep"].join(
        fill(judge["preference"], {"number": i, "dimension": p.dimension, "short": p.short,
                                   "explanation": p.explanation}) for i, p in enumerate(prefs, 1))
    return {"preferences": listed, "count": len(prefs), "task": task, "reply": reply}
