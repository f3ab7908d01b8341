"""A benchmark written in the published release layout (banks, pool, one task file per user): what
`generate` writes and `export` writes beside the runs. Deterministic bytes (memaudit/bench/files.py);
every file's resolved path must stay under the output directory. The reader is instances.py."""
from __future__ import annotations

from pathlib import Path

from memaudit.bench.files import write_json
from memaudit.bench.history import history_json
from memaudit.bench.instances import BANKS_FILE, POOL_FILE, TASKS_ROOT
from memaudit.ids import check_id, inside, refuse_links_out
from memaudit.types import CATEGORIES, Benchmark

EXPORT_TIME = "1970-01-01T00:00:00Z"  # the layout requires generated_at; wall time would break byte-identity
EXPORT_TASKS_DIR = "tasks"


def write_inside(out: Path, relative: str, data) -> None:
    write_json(inside(out, out / relative, label=relative), data)


def write_benchmark(bench: Benchmark, out_dir: str | Path) -> None:
    """Banks, pool (if the benchmark has one) and one task file per user, in the release layout."""
    out = Path(out_dir)
    for user in bench.users:
        check_id(user.id, "user id", file=f"benchmark {bench.name}", user=user.id[:40])
    refuse_links_out(out)
    users = []
    for user in bench.users:
        bank: dict[str, list] = {c: [] for c in CATEGORIES}
        for e in user.bank:
            record = {"dimension": e.dimension, "short": e.short, "explanation": e.explanation}
            if e.history:  # a static entry is written exactly as published
                record["history"] = history_json(e)
            bank.setdefault(e.category, []).append(record)
        users.append({"user_id": user.id, "base_profile": user.persona, "memory_bank": bank})
    write_inside(out, BANKS_FILE, {"generated_at": EXPORT_TIME, "source": bench.source, "num_users": len(users),
                             "users": users})
    if bench.pool:
        pool = {c: [{"name": p.name, "axis": p.axis, "answer_space": list(p.answer_space), "source": p.source}
                    for p in entries] for c, entries in bench.pool.items()}
        write_inside(out, POOL_FILE, {"meta": {"benchmark": bench.name}, **pool})
    for user in bench.users:
        tasks = bench.tasks.get(user.id, ())
        records = [{**t.review, "task": t.text, "rationale": t.rationale, "target_category": t.target_category,
                    "target_dimension": t.target_dimension, "target_short": t.target_short} for t in tasks]
        write_inside(out, f"{TASKS_ROOT}/{EXPORT_TASKS_DIR}/{user.id}.json",
               {"user_id": user.id, "generated_at": EXPORT_TIME, "n_tasks": len(records), "tasks": records})
