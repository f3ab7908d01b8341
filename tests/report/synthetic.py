"""A small synthetic audit written straight into a store: 2 users × 5 targets, runs `mem0`
(dump_all + retrieve, attributed) and `nomem` (dump_all only). The numbers are chosen so the
expected table values are easy to state:

    mem0 dump_all  B: user_001 0.65, user_002 0.55  -> 0.600 ± 0.071
    mem0           A: user_001 4/5,  user_002 5/5   -> 90.0
"""
from __future__ import annotations

from memaudit.store import Store
from memaudit.store.attributions import Attributions
from memaudit.store.scores import Scores
from memaudit.types import (CATEGORIES, Attribution, BankEntry, Benchmark, Episode, Reconstruction, Task, Turn,
                            User)

USERS = ("user_001", "user_002")
DIMENSIONS = ("cooking_skill", "tax_law_knowledge", "career_turning_point", "self_rated_patience",
              "answer_length_preference")
SHORTS = ("burns food when multitasking", "believes all refunds are taxable",
          "quit banking after a 2019 layoff", "thinks they are very patient",
          "wants bullet points, never essays")
DUMP_SCORES = {"user_001": (1.0, 0.5, 0.0, 0.75, 1.0), "user_002": (1.0, 0.75, 0.25, 0.5, 0.25)}
RETRIEVE_SCORES = {"user_001": (0.5, 0.5, 0.0, 0.75, 1.0), "user_002": (1.0, 0.25, None, 0.5, 0.25)}
DISCLOSURE = "Honestly I always burn the rice when I try to do two things at once <b>"
STORE_ITEM = "User cooks dinner while answering email & burns it"


def benchmark() -> Benchmark:
    users, tasks = [], {}
    for uid in USERS:
        bank = tuple(BankEntry(c, d, f"{s} ({uid})", f"Why {d} matters for {uid}.")
                     for c, d, s in zip(CATEGORIES, DIMENSIONS, SHORTS))
        users.append(User(uid, {"age": 41, "location": "Ohio"}, bank))
        tasks[uid] = tuple(Task(uid, i + 1, f"Help me plan task {i + 1} for {uid}", c, d, f"{s} ({uid})")
                           for i, (c, d, s) in enumerate(zip(CATEGORIES, DIMENSIONS, SHORTS)))
    return Benchmark("synthetic", tuple(users), tasks, None, "tests")


def _episode(run: str, uid: str, idx: int) -> Episode:
    satisfied = not (uid == "user_001" and idx == 5)
    turns = [Turn(1, f"Assistant reply {idx}.1 for {uid}", "add_context",
                  DISCLOSURE if idx == 1 else f"User answer {idx}.1", 4.0)]
    turns.append(Turn(2, f"Assistant reply {idx}.2 for {uid}", "satisfied" if satisfied else "followup",
                      f"User answer {idx}.2", None))
    return Episode(run, uid, idx, f"Help me plan task {idx} for {uid}", turns,
                   "satisfied" if satisfied else "max_turns")


async def fill(store: Store, runs=(("mem0", "mem0"), ("nomem", "nomem"))) -> None:
    """The runs as (run, system); a run other than `mem0` is scored like `nomem` (dump_all only, 0)."""
    bench = benchmark()
    await store.benchmarks.save(bench)
    for run, system in runs:
        await store.runs.ensure(run, system, bench.name, config={"users": list(USERS), "tasks": None,
                                                                "max_turns": 25, "k": 5, "tag": None})
        statements = []
        for uid in USERS:
            for idx in range(1, 6):
                statements += store.episodes.statements(_episode(run, uid, idx), 4.0)
                items = [] if system == "nomem" else [{"id": f"m{j}", "content": STORE_ITEM if j == 1 else
                                                       f"fact {j} of {uid}"} for j in range(1, idx + 1)]
                statements.append(store.episodes.snapshot_statement(run, uid, idx, {}, items))
            statements += _scores(bench, run, uid)
        await store.write(statements)


def _scores(bench: Benchmark, run: str, uid: str) -> list:
    statements = []
    user = next(u for u in bench.users if u.id == uid)
    passes = [("dump_all", 0, DUMP_SCORES)] + ([("retrieve", 5, RETRIEVE_SCORES)] if run == "mem0" else [])
    for mode, k, scores in passes:
        for entry, score in zip(user.bank, scores[uid] if run == "mem0" else (0.0,) * 5):
            status = "failed" if score is None else "ok"
            evidence = ({"items": [{"id": "m1", "content": STORE_ITEM, "score": 0.81}]} if mode == "retrieve"
                        else {"n_items": 5, "chars": 240})
            label = "unknown" if score == 0.0 else f"guess about {entry.dimension}"
            statements.append(Scores.reconstruction_statement(Reconstruction(
                run, mode, k, "default", uid, entry.category, entry.dimension, entry.explanation, entry.short,
                evidence, None if score is None else label, f"memory says so ({entry.dimension})", score,
                None if score is None else f"judge on {entry.dimension}", status,
                "invalid output" if score is None else None, snapshot_task=5)))
            if run == "mem0" and score is not None:
                statements.append(Attributions.statement(_attribution(run, mode, k, uid, entry, score)))
    return statements


def _attribution(run, mode, k, uid, entry, score) -> Attribution:
    idx = DIMENSIONS.index(entry.dimension) + 1
    if score >= 0.75:
        return Attribution(run, mode, k, "default", uid, entry.category, entry.dimension, "ok", score, [], idx)
    stages = [{"stage": 0, "name": "oracle", "can_invite": True, "reason": "the task invites it"}]
    if idx == 1:
        stages.append({"stage": 1, "name": "disclosure", "disclosed": True,
                       "evidence": "I always burn the rice when I try to do two things at once",
                       "reason": "the user said it outright"})
        label = "memory_failure"
    else:
        stages.append({"stage": 1, "name": "disclosure", "disclosed": False, "evidence": "", "reason": "not said"})
        stages.append({"stage": 2, "name": "elicitation", "label": "agent_elicitation_failure",
                       "reason": "the assistant never asked"})
        label = "agent_elicitation_failure"
    return Attribution(run, mode, k, "default", uid, entry.category, entry.dimension, label, score, stages, idx)
