"""`memaudit generate --evolving N`: N bank entries per user get a change at a later task.

Which entries: spread over the categories (a seeded round over the categories, a seeded pick
inside each), among entries whose targeted task is not the user's last. When: a seeded task after
the entry's targeted task, so the initial value has its own episode before the change (a task no
other change of the user has, while one is left). What: the
generator writes the change (`bank_gen:change`, checked in code like a bank entry: at most 15
words, 2-4 sentences, a real change), and a reviewer passes it (`critic:change`); a rejected change
goes back to the generator with the review, up to REWRITES times, and the entry stays static when
no change passes. Every verdict is kept in the user's generation record."""
from __future__ import annotations

import random
from dataclasses import replace

from memaudit.ask import ask
from memaudit.bench.history import history_json
from memaudit.errors import BadInput, InvalidOutput
from memaudit.llm.keys import derive_seed
from memaudit.roles import RoleSpec, obj
from memaudit.types import BANK_COUNTS, CATEGORIES, CATEGORY_DEFINITIONS, BankEntry, Version

REWRITES = 2
STR = {"type": "string", "minLength": 1}
CHANGE_SPEC = RoleSpec("change_gen", obj(op={"type": "string", "enum": ["update", "delete"]}, short=STR,
                                         explanation=STR), 0.7, None)
CRITIC_SPEC = RoleSpec("change_critic", obj(verdict={"type": "string", "enum": ["accept", "reject"]}, reason=STR),
                       0.0, None)


def check_count(n: int) -> None:
    if not 0 <= n <= sum(BANK_COUNTS.values()):
        raise BadInput(f"--evolving must be between 0 and {sum(BANK_COUNTS.values())}", field="evolving")


def pick_entries(bank: list[BankEntry], task_of: dict[str, int], n_tasks: int, n: int, seed: int,
                 user_id: str) -> list[tuple[BankEntry, int]]:
    """(entry, the task its change takes effect) for `n` entries spread over the categories."""
    rng = random.Random(derive_seed(seed, "evolving", user_id))
    pools = {c: [e for e in bank if e.category == c and task_of[e.dimension] < n_tasks] for c in CATEGORIES}
    for entries in pools.values():
        rng.shuffle(entries)
    order = list(CATEGORIES)
    rng.shuffle(order)
    picked: list[BankEntry] = []
    while len(picked) < n and any(pools.values()):
        for c in order:
            if pools[c] and len(picked) < n:
                picked.append(pools[c].pop())
    chosen: list[tuple[BankEntry, int]] = []
    for e in picked:  # a task of its own when one is left: one change per episode reads most naturally
        later = range(task_of[e.dimension] + 1, n_tasks + 1)
        free = [t for t in later if t not in {task for _, task in chosen}] or list(later)
        chosen.append((e, rng.choice(free)))
    return chosen


def change_check(entry: BankEntry, words, sentences, max_words: int):
    def check(data: dict) -> str | None:
        n = len(words(data["short"]))
        if n > max_words:
            return f"short has {n} words; use at most {max_words}"
        if words(data["short"]) == words(entry.short):
            return "short repeats the old value; write the new state"
        s = sentences(data["explanation"])
        return None if 2 <= s <= 4 else f"explanation has {s} sentence(s); write 2 to 4 sentences"
    return check


async def write_change(llm, user_id: str, persona_text: str, entry: BankEntry, task: int, n_tasks: int,
                       check) -> tuple[BankEntry | None, list[dict]]:
    """The entry with its change (None when no written change passed review) and the reviews."""
    reviews: list[dict] = []
    critique = ""
    definition = CATEGORY_DEFINITIONS[entry.category]
    for attempt in range(REWRITES + 1):
        explanation = entry.explanation + (f"\n(A reviewer rejected your last change: {critique})" if critique else "")
        try:
            change = await ask(llm, "bank_gen:change", spec=CHANGE_SPEC, check=check,
                               seed_parts=(user_id, entry.dimension, attempt), persona=persona_text,
                               category=entry.category, definition=definition, dimension=entry.dimension,
                               short=entry.short, explanation=explanation, task=task, total=n_tasks)
        except InvalidOutput as exc:
            reviews.append({"attempt": attempt, "error": exc.problem})
            continue
        data = change.data
        verdict = await ask(llm, "critic:change", spec=CRITIC_SPEC, seed_parts=(user_id, entry.dimension, attempt),
                            category=entry.category, definition=definition, before=entry.short, op=data["op"],
                            after=data["short"], explanation=data["explanation"])
        reviews.append({"attempt": attempt, **data, **verdict.data})
        if verdict.data["verdict"] == "accept":
            return evolved(entry, task, data["op"], data["short"].strip(), data["explanation"].strip()), reviews
        critique = verdict.data["reason"]
    return None, reviews


def evolved(entry: BankEntry, task: int, op: str, short: str, explanation: str) -> BankEntry:
    """The entry with its initial value from task 1 and the change from `task`; its own short and
    explanation become the current value's."""
    history = (Version(entry.short, 1, "add", entry.explanation), Version(short, task, op, explanation))
    return replace(entry, short=short, explanation=explanation, history=history)


def bank_record(entry: BankEntry) -> dict:
    record = {"category": entry.category, "dimension": entry.dimension, "short": entry.short,
              "explanation": entry.explanation, "source": entry.source}
    if entry.history:
        record["history"] = history_json(entry)
    return record
