"""A benchmark written in the published release layout (banks, pool, one task file per user): what
`generate` writes, and what `export` writes beside the runs (through its folder or archive sink,
memaudit/release/sinks.py). Deterministic bytes (memaudit/bench/files.py); every file's resolved
path must stay under the output folder. The reader is instances.py."""
from __future__ import annotations

from pathlib import Path

from memaudit.bench.files import write_json
from memaudit.bench.history import history_json
from memaudit.bench.instances import BANKS_FILE, POOL_FILE, TASKS_ROOT
from memaudit.ids import check_id, inside, refuse_links_out
from memaudit.types import CATEGORIES, Benchmark

EXPORT_TIME = "1970-01-01T00:00:00Z"  # the layout requires generated_at; wall time would break byte-identity
EXPORT_TASKS_DIR = "tasks"


class FolderWriter:
    """Files under one folder, each path checked to stay under it (symlinks followed); the release
    sinks (memaudit/release/sinks.py) write the same way."""

    def __init__(self, out: Path):
        self.out = Path(out)

    def write(self, relative: str, data) -> None:
        write_json(inside(self.out, self.out / relative, label=relative), data)


def write_benchmark(bench: Benchmark, out_dir: str | Path) -> None:
    """Banks, pool (if the benchmark has one) and one task file per user, in the release layout."""
    check_users(bench)
    refuse_links_out(Path(out_dir))
    write_benchmark_to(bench, FolderWriter(Path(out_dir)))


def check_users(bench: Benchmark) -> None:
    for user in bench.users:
        check_id(user.id, "user id", file=f"benchmark {bench.name}", user=user.id[:40])


def write_benchmark_to(bench: Benchmark, sink) -> None:
    """The benchmark's files through `sink` (anything with write(relative path, data))."""
    users = []
    for user in bench.users:
        bank: dict[str, list] = {c: [] for c in CATEGORIES}
        for e in user.bank:
            record = {"dimension": e.dimension, "short": e.short, "explanation": e.explanation}
            if e.history:  # a static entry is written exactly as published
                record["history"] = history_json(e)
            bank.setdefault(e.category, []).append(record)
        users.append({"user_id": user.id, "base_profile": user.persona, "memory_bank": bank})
    sink.write(BANKS_FILE, {"generated_at": EXPORT_TIME, "source": bench.source, "num_users": len(users),
                            "users": users})
    if bench.pool:
        pool = {c: [{"name": p.name, "axis": p.axis, "answer_space": list(p.answer_space), "source": p.source}
                    for p in entries] for c, entries in bench.pool.items()}
        sink.write(POOL_FILE, {"meta": {"benchmark": bench.name}, **pool})
    for user in bench.users:
        tasks = bench.tasks.get(user.id, ())
        records = [{**t.review, "task": t.text, "rationale": t.rationale, "target_category": t.target_category,
                    "target_dimension": t.target_dimension, "target_short": t.target_short} for t in tasks]
        sink.write(f"{TASKS_ROOT}/{EXPORT_TASKS_DIR}/{user.id}.json",
                   {"user_id": user.id, "generated_at": EXPORT_TIME, "n_tasks": len(records), "tasks": records})
