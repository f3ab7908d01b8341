"""Benchmark instances: reading the published release layout (banks, optional pool, one task file
per user), and resolving a `--bench` reference (`sample`, a directory, or a name in the store)."""
from __future__ import annotations

from pathlib import Path

from memaudit.bench.act import load_act_scenarios, read_act_dir, save_act_scenarios
from memaudit.bench.files import read_json
from memaudit.bench.history import parse_history
from memaudit.bench.pool import BUNDLED_POOL, load_pool, parse_pool
from memaudit.bench.validate import check_benchmark, unknown_categories
from memaudit.errors import BadInput
from memaudit.ids import id_problem, inside
from memaudit.types import CATEGORIES, BankEntry, Benchmark, PoolEntry, Task, User

BANKS_FILE = "Deeppersona/data/user_memory_banks_pooled_final.json"
POOL_FILE = "Deeppersona/data/dimension_pool.json"
TASKS_ROOT = "benchmark_data"
SAMPLE_DIR = Path(__file__).resolve().parent / "data" / "sample"
SAMPLE_NAME = "sample"
# Fields of a task record that map onto Task; any other field is kept in Task.review.
TASK_FIELDS = ("task", "rationale", "target_category", "target_dimension", "target_short")


def find_tasks_dir(root: Path, tasks_dir: str | None = None) -> Path:
    """The task directory under benchmark_data/: the one named, or the only one there is."""
    base = inside(root, root / TASKS_ROOT, label=TASKS_ROOT)
    if tasks_dir:
        chosen = inside(root, base / tasks_dir, label=f"{TASKS_ROOT}/{tasks_dir}")
        if not chosen.is_dir():
            raise BadInput(f"no task directory {tasks_dir!r}", file=f"{TASKS_ROOT}/{tasks_dir}")
        return chosen
    found = sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    if not found:
        raise BadInput("no task directory", file=TASKS_ROOT)
    if len(found) > 1:
        raise BadInput(f"several task directories ({', '.join(p.name for p in found)}); choose one with "
                       "--tasks-dir", file=TASKS_ROOT)
    return inside(root, found[0], label=f"{TASKS_ROOT}/{found[0].name}")


def read_release(root: str | Path, *, name: str | None = None, tasks_dir: str | None = None,
                 pool_path: str | Path | None = None, coverage: bool = True) -> tuple[Benchmark | None, list[str]]:
    """The benchmark in a release-layout directory and every problem found in it.

    The pool used for the dimension check is `pool_path` if given, else the release's own pool
    if it has one, else none (dimensions are then not checked)."""
    root = Path(root)
    problems: list[str] = []
    try:
        banks = read_json(inside(root, root / BANKS_FILE, label=BANKS_FILE), BANKS_FILE)
        pool = _read_pool(root, pool_path, problems)
    except BadInput as exc:
        return None, [str(exc)]
    users = _read_users(banks, pool, problems)
    try:
        task_dir = find_tasks_dir(root, tasks_dir)
    except BadInput as exc:
        return None, problems + [str(exc)]
    task_label = f"{TASKS_ROOT}/{task_dir.name}"
    tasks, task_files = {}, {}
    for user in users:
        label = task_files[user.id] = f"{task_label}/{user.id}.json"
        try:
            path = inside(root, task_dir / f"{user.id}.json", label=label, user=user.id)
        except BadInput as exc:
            problems.append(str(exc))
            continue
        user_tasks = _read_tasks(path, label, user.id, problems)
        if user_tasks is not None:
            tasks[user.id] = user_tasks
    known = {u.id for u in users}
    for path in sorted(task_dir.glob("*.json")):
        if path.stem not in known:
            problems.append(f"{task_label}/{path.name}: user {path.stem}: no such user in {BANKS_FILE}")
    source = banks.get("source") if isinstance(banks, dict) else None
    bench = Benchmark(name or root.resolve().name, tuple(users), tasks, pool,
                      source if isinstance(source, str) else "")
    problems += check_benchmark(bench, pool, bank_file=BANKS_FILE, task_files=task_files, coverage=coverage)
    return bench, problems


def load_release_benchmark(path: str | Path, name: str | None = None, *, tasks_dir: str | None = None,
                           pool_path: str | Path | None = None, coverage: bool = True) -> Benchmark:
    """The benchmark in a release-layout directory; BadInput listing every problem if it has any
    (`coverage`: see `check_benchmark`)."""
    bench, problems = read_release(path, name=name, tasks_dir=tasks_dir, pool_path=pool_path, coverage=coverage)
    if problems:
        raise BadInput(f"{len(problems)} problem(s) in {path}: " + "; ".join(problems))
    return bench


def _read_pool(root: Path, pool_path, problems: list[str]) -> dict[str, list[PoolEntry]] | None:
    path, label = (Path(pool_path), str(pool_path)) if pool_path else (root / POOL_FILE, POOL_FILE)
    if not pool_path and not path.exists():
        return None
    if not pool_path:  # a pool given with --pool is the user's own file, not part of the release
        path = inside(root, path, label=label)
    try:
        pool, pool_problems = parse_pool(read_json(path, label), label)
    except BadInput as exc:
        problems.append(str(exc))
        return None
    problems += pool_problems
    return pool


def _read_users(banks, pool, problems: list[str]) -> list[User]:
    raw_users = banks.get("users") if isinstance(banks, dict) else None
    if not isinstance(raw_users, list):
        problems.append(f"{BANKS_FILE}: users: missing list of users")
        return []
    sources = {(p.category, p.name): p.source for entries in (pool or {}).values() for p in entries}
    users, seen = [], set()
    for i, raw in enumerate(raw_users):
        user_id = raw.get("user_id") if isinstance(raw, dict) else None
        if not isinstance(user_id, str) or not user_id:
            problems.append(f"{BANKS_FILE}: users[{i}].user_id: missing")
            continue
        unsafe = id_problem(user_id, "user id")
        if unsafe is not None:  # it would name files: skipped before any path is built from it
            problems.append(f"{BANKS_FILE}: user {user_id[:40]}: users[{i}].user_id: {unsafe}")
            continue
        where = f"{BANKS_FILE}: user {user_id}"
        if user_id in seen:
            problems.append(f"{where}: users[{i}].user_id: duplicate user")
            continue
        seen.add(user_id)
        persona = raw.get("base_profile")
        if not isinstance(persona, dict):
            problems.append(f"{where}: base_profile: missing object")
            persona = {}
        memory_bank = raw.get("memory_bank")
        if not isinstance(memory_bank, dict):
            problems.append(f"{where}: memory_bank: missing object of categories")
            memory_bank = {}
        problems += unknown_categories(memory_bank, where)
        bank = []
        for category, entries in memory_bank.items():
            if category not in CATEGORIES:
                continue  # reported just above
            if not isinstance(entries, list):
                problems.append(f"{where}: memory_bank.{category}: expected a list")
                continue
            for j, entry in enumerate(entries):
                if not isinstance(entry, dict):
                    problems.append(f"{where}: memory_bank.{category}[{j}]: expected an object")
                    continue
                dimension = _text(entry, "dimension")
                history, history_problems = parse_history(entry.get("history"),
                                                          f"{where}: memory_bank.{category}[{j}] ({dimension})")
                problems += history_problems
                bank.append(BankEntry(category, dimension, _text(entry, "short"), _text(entry, "explanation"),
                                      sources.get((category, dimension), ""), history))
        users.append(User(user_id, persona, tuple(bank)))
    return users


def _read_tasks(path: Path, label: str, user_id: str, problems: list[str]) -> tuple[Task, ...] | None:
    if not path.exists():
        problems.append(f"{label}: user {user_id}: missing task file for a user of the bank")
        return None
    try:
        data = read_json(path, label, user_id)
    except BadInput as exc:
        problems.append(str(exc))
        return None
    where = f"{label}: user {user_id}"
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        problems.append(f"{where}: tasks: missing list of tasks")
        return None
    if data.get("user_id") != user_id:
        problems.append(f"{where}: user_id: {data.get('user_id')!r} does not match the file name")
    tasks = []
    for i, raw in enumerate(data["tasks"]):
        if not isinstance(raw, dict):
            problems.append(f"{where}: tasks[{i}]: expected an object")
            continue
        review = {k: v for k, v in raw.items() if k not in TASK_FIELDS}
        tasks.append(Task(user_id, i + 1, _text(raw, "task"), _text(raw, "target_category"),
                          _text(raw, "target_dimension"), _text(raw, "target_short"), _text(raw, "rationale"),
                          review))
    return tuple(tasks)


def _sample_pool() -> Path | None:
    """The sample's own pool file, else the bundled pool its banks were drawn from."""
    return None if (SAMPLE_DIR / POOL_FILE).exists() else BUNDLED_POOL


def _text(record: dict, key: str) -> str:
    """A text field; anything else (missing, null, a number) reads as empty and fails the checks."""
    value = record.get(key)
    return value if isinstance(value, str) else ""


async def resolve_bench(store, ref: str) -> Benchmark:
    """`sample` (imported on first use), a release-layout directory (imported under its directory
    name unless already there), or the name of a benchmark in the store."""
    if ref == SAMPLE_NAME:
        stored = await store.benchmarks.load(SAMPLE_NAME)
        if stored is not None:
            return stored
        bench = load_release_benchmark(SAMPLE_DIR, name=SAMPLE_NAME, pool_path=_sample_pool())
        await store.benchmarks.save(bench)
        return bench
    if Path(ref).is_dir():
        bench = load_release_benchmark(ref)
        stored = await store.benchmarks.load(bench.name)
        if stored is None:
            await store.benchmarks.save(bench)
            await save_act_scenarios(store, bench.name, read_act_dir(ref, bench))
            return bench
        if stored != bench:
            raise BadInput(f"the store already holds a different benchmark named {bench.name!r}; import this "
                           "one under another name with `memaudit bench import PATH --name NAME`", file=ref)
        return stored
    stored = await store.benchmarks.load(ref)
    if stored is None:
        names = [b["name"] for b in await store.benchmarks.list()]
        raise BadInput(f"unknown benchmark {ref!r}: not a directory, and the store holds "
                       f"{', '.join(names) if names else 'no benchmarks'} (use `sample`, a path, or an imported name)",
                       field="bench")
    return stored


async def resolve_act_scenarios(store, bench: Benchmark) -> dict:
    """The benchmark's Act scenarios (memaudit/bench/act.py) in the store, user -> dimension ->
    scenario; the bundled sample's are imported on first use, like the sample itself."""
    found = await load_act_scenarios(store, bench.name)
    if not found and bench.name == SAMPLE_NAME:
        await save_act_scenarios(store, SAMPLE_NAME, read_act_dir(SAMPLE_DIR, bench))
        found = await load_act_scenarios(store, bench.name)
    return found


async def validate_bench(store, ref: str, *, pool_path: str | Path | None = None,
                         tasks_dir: str | None = None) -> list[str]:
    """Every problem of the benchmark `ref` (same references as resolve_bench); nothing is imported."""
    if ref == SAMPLE_NAME:
        return read_release(SAMPLE_DIR, name=SAMPLE_NAME, pool_path=pool_path or _sample_pool())[1]
    if Path(ref).is_dir():
        return read_release(ref, tasks_dir=tasks_dir, pool_path=pool_path)[1]
    bench = await store.benchmarks.load(ref)
    if bench is None:
        raise BadInput(f"unknown benchmark {ref!r}: not a directory, nor a benchmark in the store", field="bench")
    pool = load_pool(pool_path) if pool_path else bench.pool
    label = f"benchmark {ref}"
    return check_benchmark(bench, pool, bank_file=label, task_files={u.id: label for u in bench.users})
