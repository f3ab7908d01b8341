"""Synthetic releases in the published layout, written file by file (not through our exporter, so
the importer is tested against the layout itself). Used by the tests and by perf/release_import.py."""
from __future__ import annotations

import random
from pathlib import Path

import orjson

from memaudit.types import BANK_COUNTS, CATEGORIES, RUBRIC

BANKS = "Deeppersona/data/user_memory_banks_pooled_final.json"
POOL = "Deeppersona/data/dimension_pool.json"
RETRIEVE_SYSTEMS = ("amem", "longctx_full", "mem0", "memt")


def dimension(category: str, j: int) -> str:
    return f"{category.split('_')[0]}_axis_{j}"


SYLLABLES = ("ka", "lo", "mi", "ten", "ar", "su", "ve", "ri", "dan", "po", "el", "nu", "sha", "qu", "ib", "or")


def vocabulary(seed: int = 0, size: int = 3000) -> list[str]:
    """Pseudo-words for text that compresses about as well as prose (a repeated letter compresses
    a hundredfold and would flatter any compressed output)."""
    rng = random.Random(seed)
    return ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(size)]


def prose(rng: random.Random, words: list[str], chars: int) -> str:
    """About `chars` characters of words drawn from `words` (gzip keeps about a third, as of prose)."""
    out, n = [], 0
    while n < chars:
        word = rng.choice(words)
        out.append(word)
        n += len(word) + 1
    return " ".join(out)[:chars]


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data))


# (run, memories per user, chars per memory): roughly the published footprints, for the
# 50-user benchmarks of import and report.
PUBLISHED_RUNS = (("nomem_pooled_50", 0, 0), ("amem_pooled_50", 109, 430), ("longctx_full_pooled_50", 160, 600),
                  ("mem0_pooled_50", 60, 120), ("memt_memonly_pooled_50", 471, 1015))


def write_release(root: Path, *, users: int = 3, runs: tuple[str, ...] = (), tasks_dir: str = "CustomTasksPooledFinal",
                  pool: bool = True, turns: int = 2, reply_chars: int = 80, memories: int = 3,
                  memory_chars: int = 60, seed: int = 0, transcript_stores: bool = False,
                  wordy: bool = False) -> Path:
    """A release with `users` users (7/7/7/5/5 banks, one task per entry) and the given runs.

    `wordy`: replies, user messages and memories are pseudo-word prose instead of a repeated letter.

    `transcript_stores`: every reply and user message is distinct, and a longctx_full run's
    memories.json holds what the published longctx_full stored of its transcripts (`longctx_store`)
    instead of `memories` filler items."""
    rng = random.Random(seed)
    words = vocabulary() if wordy else None
    root = Path(root)
    user_ids = [f"user_{i:03d}" for i in range(1, users + 1)]
    if pool:
        _write(root / POOL, {"meta": {"note": "fixture"}, **{
            c: [{"name": dimension(c, j), "axis": f"What is the user's {c} axis {j}?", "answer_space": ["low", "high"],
                 "source": "fixture framework"} for j in range(BANK_COUNTS[c] + 2)] for c in CATEGORIES}})
    bank_users = []
    for uid in user_ids:
        bank = {c: [{"dimension": dimension(c, j), "short": f"{uid} stance on {c} {j}",
                     "explanation": f"Why {uid} holds this stance. It shows in daily life."}
                    for j in range(BANK_COUNTS[c])] for c in CATEGORIES}
        bank_users.append({"user_id": uid, "base_profile": {"age": 30 + len(bank_users), "name": uid}, "memory_bank": bank})
        tasks = [{"task": f"Help me plan something about {dimension(c, j)} please.", "rationale": "fixture",
                  "target_category": c, "target_dimension": dimension(c, j), "target_short": f"{uid} stance on {c} {j}",
                  "pipeline_note": "accepted"} for c in CATEGORIES for j in range(BANK_COUNTS[c])]
        _write(root / "benchmark_data" / tasks_dir / f"{uid}.json",
               {"user_id": uid, "generated_at": "2025-01-01", "n_tasks": len(tasks), "tasks": tasks})
        for run in runs:
            _write_run_user(root, run, uid, bank, tasks, rng, turns, reply_chars, memories, memory_chars,
                            transcript_stores, words)
    _write(root / BANKS, {"generated_at": "2025-01-01", "source": "fixture pool", "num_users": users, "users": bank_users})
    if runs:
        for uid in user_ids:
            _write(root / "output" / "_task_design_oracle" / f"{uid}.json",
                   {t["target_dimension"]: {"can_invite": i % 5 != 0, "reason": "fixture"}
                    for i, t in enumerate(tasks)})
        for run in runs:
            _write(root / "output" / run / f"{run}_20250101_merged.json", {"num_users": users, "aggregate": {}})
    return root


def longctx_store(episodes: list[dict]) -> list[dict]:
    """The store the published longctx_full kept of a user's episodes (history records, in task
    order): per task its text, then per turn the agent reply and the user message — except the
    episode's last reply, which its runner never handed to memory (the final user message came in
    after the episode, as a turn without a reply)."""
    items = []
    for k, episode in enumerate(episodes, start=1):
        items.append({"content": f"[Task {k}] {episode['task']}", "category": "task", "task_index": k})
        turns = episode["turns"]
        for t, record in enumerate(turns, start=1):
            if t < len(turns):
                items.append({"content": f"Agent: {record['agent_response']}", "category": "agent_reply",
                              "task_index": k, "turn": t})
            items.append({"content": f"User: {record['user_simulator']['text']}", "category": "user_reply",
                          "task_index": k, "turn": t})
    return items


def _write_run_user(root, run, uid, bank, tasks, rng, turns, reply_chars, memories, memory_chars,
                    transcript_stores, words) -> None:
    def text(letter: str, chars: int) -> str:
        return letter * chars if words is None else prose(rng, words, chars)

    episodes = []
    for i, task in enumerate(tasks, start=1):
        n = rng.randint(1, turns)
        records = []
        for t in range(1, n + 1):
            done = t == n and rng.random() < 0.9
            agent, user = text("a", reply_chars), text("u", reply_chars // 4)
            if transcript_stores:
                agent, user = f"{uid} task {i} reply {t}: {agent}", f"{uid} task {i} message {t}: {user}"
            records.append({"turn": t, "agent_response": agent,
                            "user_simulator": {"feedback_type": "satisfied" if done else "followup",
                                               "text": user, "is_done": done},
                            "preference_evaluator": {"score": rng.choice([None, 3.0, 4.5, 5.0])}})
        end = "satisfied" if records[-1]["user_simulator"]["is_done"] else "max_turns"
        episode = {"user_id": uid, "task": task["task"], "ground_truth": None, "end_reason": end,
                   "final_preference_score": records[-1]["preference_evaluator"]["score"], "turns": records}
        _write(root / "history" / run / uid / f"episode_{i}.json", episode)
        episodes.append(episode)
        _write(root / "pref_judge" / run / uid / f"episode_{i}.json", {
            "user_id": uid, "task": task["task"], "prefs": [],
            "turns": [{"turn": r["turn"], "agent_response": r["agent_response"], "score": r["preference_evaluator"]["score"],
                       "summary": "", "per_pref": [{"idx": 0, "score": 4}]} for r in records]})
    is_nomem = run.startswith("nomem")
    items = [] if is_nomem else [{"id": f"m{j}", "content": text("m", memory_chars), "tags": ["x"]}
                                 for j in range(memories)]
    if transcript_stores and run.startswith("longctx_full"):
        items = longctx_store(episodes)
    _write(root / "memory" / run / uid / "memories.json", {"num_memories": len(items), "memories": items})
    modes = [run] if is_nomem or not run.startswith(RETRIEVE_SYSTEMS) else [run, f"{run}_retrieve"]
    for out_dir in modes:
        details = []
        for c in CATEGORIES:
            for e in bank[c]:
                score = rng.choice(RUBRIC.scores)
                detail = {"category": c, "dimension": e["dimension"], "explanation": e["explanation"],
                          "ground_truth": e["short"], "predicted": "unknown" if score == 0 else "something",
                          "slot_fill_reason": "r", "score": score, "judge_reason": "j",
                          "scoring_mode": "retrieve" if out_dir.endswith("_retrieve") else "dump_all"}
                if out_dir.endswith("_retrieve"):
                    detail["retrieved_memories"] = items[:5]
                details.append(detail)
        _write(root / "output" / out_dir / "recon_judge" / f"{uid}.json",
               {"user_id": uid, "per_category": {}, "overall": 0, "details": details})
        attributed = [{**d, "attribution": {"category": "ok" if RUBRIC.is_recovered(d["score"]) else "memory_failure",
                                            "score": d["score"], "stages": [], "ep_index": 1, "note": ""}}
                      for d in details]
        _write(root / "output" / out_dir / "attribution" / f"{uid}.json",
               {"user_id": uid, "tasks_dir": "CustomTasksPooledFinal", "counts": {}, "details": attributed})
