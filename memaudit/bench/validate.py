"""Checks of a benchmark's content. Every problem is one line naming the file, the user and the
field, and all problems are collected, not just the first."""
from __future__ import annotations

from collections import Counter

from memaudit.bench.history import history_problems, value_at
from memaudit.ids import id_problem
from memaudit.types import BANK_COUNTS, CATEGORIES, Benchmark, PoolEntry, User


def check_benchmark(bench: Benchmark, pool: dict[str, list[PoolEntry]] | None, *, bank_file: str,
                    task_files: dict[str, str], coverage: bool = True) -> list[str]:
    """Problems in the banks and tasks of `bench`; `task_files` maps user id -> its task file label.

    `coverage=False` skips the checks of how tasks cover the bank (one task per entry, target fields
    equal to the bank's) and of dimensions against the pool: a published run is imported as it was
    recorded, and the protocol scores an entry no task targets as `no_targeted_task`."""
    problems: list[str] = []
    for user in bench.users:
        problems += _check_bank(user, pool if coverage else None, bank_file)
        problems += _check_histories(user, bench.tasks.get(user.id), bank_file)
        if user.id in bench.tasks:
            problems += _check_tasks(user, bench.tasks[user.id], task_files.get(user.id, bank_file), coverage)
    return problems


def unknown_categories(memory_bank: dict, where: str) -> list[str]:
    """Every category of a bank as read from its file that is not one of the five, even one whose
    list is empty (it leaves no entry behind to be checked later)."""
    return [f"{where}: memory_bank.{category}: unknown category"
            for category in sorted(set(memory_bank) - set(CATEGORIES))]


def _check_bank(user: User, pool: dict[str, list[PoolEntry]] | None, file: str) -> list[str]:
    where = f"{file}: user {user.id}"
    problems: list[str] = []
    unsafe = id_problem(user.id, "user id")
    if unsafe is not None:
        problems.append(f"{where}: user_id: {unsafe}")
    counts = Counter(e.category for e in user.bank)
    for category in sorted(set(counts) - set(CATEGORIES)):
        problems.append(f"{where}: memory_bank.{category}: unknown category")
    for category in CATEGORIES:
        if counts[category] != BANK_COUNTS[category]:
            problems.append(f"{where}: memory_bank.{category}: {counts[category]} entries, "
                            f"expected {BANK_COUNTS[category]}")
    pool_names = {c: {p.name for p in entries} for c, entries in (pool or {}).items()}
    seen: set[str] = set()
    position: Counter = Counter()
    for entry in user.bank:
        field = f"memory_bank.{entry.category}[{position[entry.category]}]"
        position[entry.category] += 1
        for name in ("dimension", "short", "explanation"):
            if not getattr(entry, name).strip():
                problems.append(f"{where}: {field}.{name}: missing text")
        if entry.dimension in seen:
            problems.append(f"{where}: {field}.dimension: duplicate dimension {entry.dimension!r}")
        seen.add(entry.dimension)
        if pool is not None and entry.category in CATEGORIES and entry.dimension \
                and entry.dimension not in pool_names.get(entry.category, ()):
            problems.append(f"{where}: {field}.dimension: {entry.dimension!r} is not in the pool's "
                            f"{entry.category}")
    return problems


def _check_histories(user: User, tasks, file: str) -> list[str]:
    n_tasks = len(tasks) if tasks else None
    problems: list[str] = []
    position: Counter = Counter()
    for entry in user.bank:
        field = f"memory_bank.{entry.category}[{position[entry.category]}]"
        position[entry.category] += 1
        problems += history_problems(entry, n_tasks, f"{file}: user {user.id}: {field}")
    return problems


def _check_tasks(user: User, tasks, file: str, coverage: bool) -> list[str]:
    where = f"{file}: user {user.id}"
    problems: list[str] = []
    bank = {e.dimension: e for e in user.bank}
    targeted: dict[str, list[int]] = {}
    for i, task in enumerate(tasks):
        field = f"tasks[{i}]"
        if not task.text.strip():
            problems.append(f"{where}: {field}.task: missing text")
        if task.target_category not in CATEGORIES:
            problems.append(f"{where}: {field}.target_category: unknown category {task.target_category!r}")
        if not coverage:
            continue
        entry = bank.get(task.target_dimension)
        if entry is None:
            problems.append(f"{where}: {field}.target_dimension: {task.target_dimension!r} is not in the bank")
            continue
        targeted.setdefault(task.target_dimension, []).append(task.index)
        if task.target_category != entry.category:
            problems.append(f"{where}: {field}.target_category: {task.target_category!r} but the bank has "
                            f"{task.target_dimension!r} under {entry.category!r}")
        valid = value_at(entry, task.index)  # an evolving entry's task targets the value of its time
        if _normal(task.target_short) != _normal(valid.short if valid else entry.short):
            problems.append(f"{where}: {field}.target_short: differs from the bank's short for "
                            f"{task.target_dimension!r}" + (f" (the value valid at task {task.index})"
                                                            if entry.history else ""))
    for entry in user.bank if coverage else ():
        indices = targeted.get(entry.dimension, [])
        if not indices:
            problems.append(f"{where}: tasks: no task targets {entry.category}/{entry.dimension!r}")
        elif len(indices) > 1:
            problems.append(f"{where}: tasks: {entry.dimension!r} is targeted by several tasks "
                            f"({', '.join(map(str, indices))})")
    return problems


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()
