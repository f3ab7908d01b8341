"""Human grades: the targets of an audit page (sampled with a seed, stratified by category and
judged score), their ids, and `memaudit human import FILE` for the grades exported from the page:

    {"grader": NAME, "grades": [{"id": ID, "score": 0|0.25|0.5|0.75|1}]}

An id names one scored target of the default variant (run, mode, k, user, dimension) by a hash, so
a grades file can be imported into any copy of the store that holds the target."""
from __future__ import annotations

import hashlib
import random
from pathlib import Path

import orjson

from memaudit.errors import BadInput
from memaudit.store import Store, select_runs
from memaudit.types import DEFAULT_VARIANT, RUBRIC
from memaudit.userfiles import read_regular

TARGET = ("run", "mode", "k", "user_id", "dimension")
SHOWN = 5  # unknown ids named in an error
MAX_GRADES_BYTES = 64 * 1024 * 1024  # a grades file: a few hundred bytes per graded target


def target_id(row) -> str:
    text = "\x1f".join(str(row[c]) for c in TARGET)
    return "t" + hashlib.sha256(text.encode()).hexdigest()[:12]


async def gradable(store: Store, runs: list[str]) -> list[dict]:
    """Every default-variant target with a prediction and a judged score, in key order."""
    rows = [dict(r) async for r in store.judges.targets(runs, DEFAULT_VARIANT)
            if r["status"] == "ok" and r["label"] is not None and r["score"] is not None] if runs else []
    return sorted(rows, key=lambda r: tuple(r[c] for c in TARGET))


def sample_targets(rows: list[dict], n: int, seed: int) -> list[dict]:
    """n targets spread over (category, judged score) strata: each stratum is shuffled with the
    seed and the strata are visited in turn, so rare scores and small categories are not crowded
    out by the common ones."""
    strata: dict[tuple, list[dict]] = {}
    for r in rows:
        strata.setdefault((r["category"], r["score"]), []).append(r)
    queues = []
    for key in sorted(strata):
        members = list(strata[key])
        random.Random(f"audit:{seed}:{key[0]}:{key[1]}").shuffle(members)
        queues.append(members)
    chosen = []
    while len(chosen) < n and any(queues):
        for queue in queues:
            if queue and len(chosen) < n:
                chosen.append(queue.pop(0))
    return chosen


def read_grades(path: Path) -> tuple[str, list[tuple[str, float]]]:
    """(grader, [(id, score)]) from an exported file; every problem is one line naming the file."""
    try:
        data = orjson.loads(read_regular(path, limit=MAX_GRADES_BYTES))
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"not JSON: {exc}", file=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("grader"), str) or not data["grader"].strip():
        raise BadInput("expected an object with a non-empty \"grader\" name", file=str(path), field="grader")
    grades = data.get("grades")
    if not isinstance(grades, list) or not all(isinstance(g, dict) and isinstance(g.get("id"), str) for g in grades):
        raise BadInput("expected \"grades\": a list of {\"id\", \"score\"}", file=str(path), field="grades")
    bad = [g for g in grades if isinstance(g.get("score"), bool) or g.get("score") not in RUBRIC.scores]
    if bad:
        names = ", ".join(f"{g['id']}={g.get('score')!r}" for g in bad[:SHOWN])
        raise BadInput(f"invalid level for {len(bad)} grade(s): {names}; a level is one of "
                       f"{', '.join(f'{score:g}' for score in RUBRIC.scores)}",
                       file=str(path), field="score")
    ids = [g["id"] for g in grades]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise BadInput(f"graded twice: {', '.join(twice[:SHOWN])}", file=str(path), field="id")
    return data["grader"].strip(), [(g["id"], float(g["score"])) for g in grades]


async def import_grades(store: Store, path: Path) -> tuple[str, int]:
    """Store the grades of one file, all or nothing; returns (grader, grades stored)."""
    grader, grades = read_grades(path)
    runs = [r.run for r in await select_runs(store, None)]
    known = {target_id(r): r for r in await gradable(store, runs)}
    unknown = [i for i, _ in grades if i not in known]
    if unknown:
        raise BadInput(f"unknown target id(s) {', '.join(unknown[:SHOWN])}"
                       f"{f' and {len(unknown) - SHOWN} more' if len(unknown) > SHOWN else ''}: not a scored target "
                       "of this store", file=str(path), field="id")
    await store.write([store.judges.grade_statement(grader, tuple(known[i][c] for c in TARGET), score)
                       for i, score in grades])
    return grader, len(grades)
