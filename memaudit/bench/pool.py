"""The dimension pool: the fixed, axis-neutral dimensions a user's bank may pick from, and the
category definitions (with their "NOT" boundaries) shown to every reader of a category."""
from __future__ import annotations

from pathlib import Path

from memaudit.bench.files import read_json
from memaudit.errors import BadInput
from memaudit.types import CATEGORIES, PoolEntry

BUNDLED_POOL = Path(__file__).resolve().parent / "data" / "dimension_pool.json"


def parse_pool(data, file: str) -> tuple[dict[str, list[PoolEntry]], list[str]]:
    """Pool entries from a parsed pool file, and every problem found (file and field named)."""
    problems: list[str] = []
    if not isinstance(data, dict):
        return {}, [f"{file}: top level: expected an object of categories"]
    pool: dict[str, list[PoolEntry]] = {}
    for category in CATEGORIES:
        entries = data.get(category)
        if not isinstance(entries, list):
            problems.append(f"{file}: {category}: missing list of dimensions")
            continue
        pool[category] = []
        for i, raw in enumerate(entries):
            name = raw.get("name") if isinstance(raw, dict) else None
            if not isinstance(name, str) or not name.strip():
                problems.append(f"{file}: {category}[{i}].name: missing text")
                continue
            answers = raw.get("answer_space") or ()
            pool[category].append(PoolEntry(category, name, str(raw.get("axis", "")),
                                            tuple(str(a) for a in answers), str(raw.get("source", ""))))
    # Other top-level keys (meta, notes) are documentation; only an unknown *list* looks like a category.
    unknown = sorted(k for k, v in data.items() if k not in CATEGORIES and isinstance(v, list))
    problems.extend(f"{file}: {key}: unknown category" for key in unknown)
    return pool, problems


def load_pool(path: str | Path | None = None) -> dict[str, list[PoolEntry]]:
    """The pool in `path` (default: the bundled one), category -> entries in file order."""
    path = Path(path) if path else BUNDLED_POOL
    pool, problems = parse_pool(read_json(path, str(path)), str(path))
    if problems:
        raise BadInput("; ".join(problems))
    return pool
