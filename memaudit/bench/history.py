"""Evolving bank entries: a bank entry may carry a `history`, an ordered list of versions
`{short, explanation?, valid_from_task, op}` (op: add | update | delete). The first version is the
initial value (usually valid from task 1; later when the fact only appears later); the current
value is the last version, and a `delete` means the entry is no longer true.

This module is the one place that knows what a history means: reading it from the release
layout, checking it, the value valid at a task, the bank as the simulated user holds it at a
task, the targets of a run that stopped at a task, and the changes a rollout must disclose. An
entry without a history is static, and every function here leaves static entries and users exactly
as they are."""
from __future__ import annotations

from dataclasses import dataclass, replace

from memaudit.types import VERSION_OPS, BankEntry, User, Version, versions_until


@dataclass(frozen=True)
class Change:
    """A version that takes effect after the start: disclosed in the first episode at or after
    `valid_from_task`. `version` is its 0-based position in the entry's history."""
    dimension: str
    version: int
    valid_from_task: int


def is_evolving(entry: BankEntry) -> bool:
    return bool(entry.history)


def parse_history(raw, where: str) -> tuple[tuple[Version, ...], list[str]]:
    """The versions of a bank entry's `history` field as read from a file (None: static), and one
    problem per malformed version. A malformed version is left out; its problem fails the file."""
    if raw is None:
        return (), []
    if not isinstance(raw, list) or not raw:
        return (), [f"{where}.history: expected a non-empty list of versions"]
    versions, problems = [], []
    for i, item in enumerate(raw):
        at = f"{where}.history[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{at}: expected an object")
            continue
        task = item.get("valid_from_task")
        if isinstance(task, bool) or not isinstance(task, int):
            problems.append(f"{at}.valid_from_task: expected an integer task index, got {task!r}")
            continue
        explanation = item.get("explanation", "")
        if not isinstance(explanation, str):
            problems.append(f"{at}.explanation: expected text")
            explanation = ""
        short, op = item.get("short"), item.get("op")
        versions.append(Version(short if isinstance(short, str) else "", task, op if isinstance(op, str) else "",
                                explanation))
    return tuple(versions), problems


def history_problems(entry: BankEntry, n_tasks: int | None, where: str) -> list[str]:
    """Every problem of an entry's history: order, task range and op semantics (the first version
    adds; update and delete need a live value; add only opens or follows a delete), a `short` on
    every version, and the entry's `short` equal to the current (last) version's. `where` names
    the file, user and entry; each problem names the dimension and the version."""
    where = f"{where} ({entry.dimension}): history"
    problems: list[str] = []
    previous: Version | None = None
    for i, v in enumerate(entry.history):
        at = f"{where}[{i}]"
        if not v.short.strip():
            problems.append(f"{at}.short: missing text (every version needs a short)")
        if v.valid_from_task < 1 or (n_tasks is not None and v.valid_from_task > n_tasks):
            upper = f"..{n_tasks}" if n_tasks is not None else " or later"
            problems.append(f"{at}.valid_from_task: task {v.valid_from_task} is outside the user's tasks 1{upper}")
        if previous is not None and v.valid_from_task <= previous.valid_from_task:
            problems.append(f"{at}.valid_from_task: task {v.valid_from_task} is not after version {i - 1}'s task "
                            f"{previous.valid_from_task} (versions must be in task order)")
        problems += _op_problems(v, previous, at, i)
        previous = v
    if entry.history and " ".join(entry.short.split()) != " ".join(entry.history[-1].short.split()):
        problems.append(f"{where}: the entry's short differs from the last version's (the current value)")
    return problems


def _op_problems(v: Version, previous: Version | None, at: str, i: int) -> list[str]:
    if v.op not in VERSION_OPS:
        return [f"{at}.op: {v.op!r} is not one of {', '.join(VERSION_OPS)}"]
    if previous is None:
        return [] if v.op == "add" else [f"{at}.op: the first version must be add, not {v.op}"]
    if previous.op == "delete" and v.op != "add":
        return [f"{at}.op: {v.op} after a delete (version {i - 1}); only add can follow a delete"]
    if previous.op != "delete" and v.op == "add":
        return [f"{at}.op: add while version {i - 1} is still live; use update"]
    return []


def value_at(entry: BankEntry, task_index: int) -> Version | None:
    """The version valid at a task (None before the first one takes effect); a static entry's
    value is its own short and explanation."""
    if not entry.history:
        return Version(entry.short, 1, "add", entry.explanation)
    valid = versions_until(entry.history, task_index)
    return valid[-1] if valid else None


def entry_at(entry: BankEntry, task_index: int) -> BankEntry | None:
    """The entry as the person holds it at a task: the valid version's short and explanation (the
    entry's own explanation when the version has none), no history; None before it exists."""
    found = entry_for_run(entry, task_index)
    return found if found is None or not found.history else replace(found, history=())


def user_at(user: User, task_index: int) -> User:
    """The user with the bank valid at a task (the same object for a static bank)."""
    if not any(e.history for e in user.bank):
        return user
    bank = tuple(e for e in (entry_at(e, task_index) for e in user.bank) if e is not None)
    return replace(user, bank=bank)


def entry_for_run(entry: BankEntry, last_task: int) -> BankEntry | None:
    """The entry as a target of a run whose last played task is `last_task`: its truth is the
    version valid then, and its superseded values are the versions before it. A version that takes
    effect after the run's end is no target of that run (its truth is not yet true, its predecessor
    not yet stale). An entry that did not change inside the run is a static target (no history);
    one not yet true at the run's end is no target (None). A static entry is returned as it is."""
    if not entry.history:
        return entry
    valid = versions_until(entry.history, last_task)
    if not valid:
        return None
    now = valid[-1]
    changed = any(v.valid_from_task > 1 for v in valid)
    return replace(entry, short=now.short, explanation=now.explanation or entry.explanation,
                   history=valid if changed else ())


def user_for_run(user: User, last_task: int) -> User:
    """The user with the bank a run that played to `last_task` targets (the same object for a
    static bank)."""
    if not any(e.history for e in user.bank):
        return user
    bank = tuple(e for e in (entry_for_run(e, last_task) for e in user.bank) if e is not None)
    return replace(user, bank=bank)


def changes(user: User) -> list[Change]:
    """Every version that takes effect after task 1, in bank and history order."""
    return [Change(e.dimension, i, v.valid_from_task) for e in user.bank for i, v in enumerate(e.history)
            if v.valid_from_task > 1]


def superseded(entry: BankEntry) -> list[tuple[int, Version]]:
    """The versions that are no longer true at the end: every version but the last."""
    return list(enumerate(entry.history[:-1]))


def history_json(entry: BankEntry) -> list[dict]:
    """The history as written in the release layout (`explanation` only when a version has one)."""
    return [{"short": v.short, **({"explanation": v.explanation} if v.explanation else {}),
             "valid_from_task": v.valid_from_task, "op": v.op} for v in entry.history]
