"""Top-5 agreement of memaudit's retrieve query with the published one (issue 23; amem and mem0: issue 35).

On the published stores of one system (`--system`: longctx_full, amem or mem0), each target is
searched (through `memaudit memory search`, the command users run) with memaudit's own query (our
category definitions) and, given a published prompt pack (`memaudit prompts import-published`), with
the published query (the published category guides). Each top-5 is compared with the
`retrieved_memories` the release recorded for that target: items in common (of 5), the same five
items, identical lists (same items, same order), and, where both sides score alike (longctx_full:
cosine), the largest score difference on a shared item; targets whose published-query list differs
are named. An imported store is searched as memaudit searches it: amem over each note's content
enriched with its final context, keywords and tags (the published index held each note as first
written: docs/fidelity.md M7), mem0 with memaudit's `mem0` (cosine over MiniLM vectors of its facts;
the published mem0ai searched text-embedding-3-small vectors: M14).

Needs a checkout of the published release (sora1998/MemProbe: `memory/<run>/` and
`output/<run>_retrieve/recon_judge/`). Run:
    .venv/bin/python perf/retrieve_query_agreement.py --release ~/MemProbe [--system amem] [--pack DIR] [--users 8]"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memaudit.prompts import category_guides  # noqa: E402
from memaudit.scoring.recovery import retrieval_query  # noqa: E402
from memaudit.types import CATEGORY_DEFINITIONS  # noqa: E402

# system -> (its published run, how an item is told apart, whether its scores are ours: cosine)
SYSTEMS = {"longctx_full": ("longctx_full_pooled_50", ("content", "task_index", "turn"), True),
           "amem": ("amem_pooled_50", ("id",), False),
           "mem0": ("mem0_pooled_50", ("id",), False)}


def search(system: str, store: Path, queries: list[dict], work: Path) -> dict:
    """id -> top-5 results, from one `memaudit memory search` process."""
    qfile = work / "queries.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in queries))
    done = subprocess.run([sys.executable, str(ROOT / "memaudit.py"), "memory", "search", "--system", system,
                           "--store", str(store), "--queries", str(qfile), "--k", "5", "--db", str(work / "m.db")],
                          capture_output=True, text=True, check=True)
    return {line["id"]: line["results"] for line in map(json.loads, done.stdout.splitlines())}


def compare(found: list[dict], published: list[dict], fields: tuple, same_scores: bool) -> tuple:
    """(items in common, same set, same list, largest score difference on a shared item or None)."""
    def identity(item: dict) -> tuple:
        return tuple(item.get(f) for f in fields)
    ours, theirs = [identity(i) for i in found], [identity(i) for i in published]
    gap = None
    if same_scores:
        scores = {identity(i): i["score"] for i in published}
        gap = max((abs(i["score"] - scores[identity(i)]) for i in found if identity(i) in scores), default=0.0)
    return len(set(ours) & set(theirs)), set(ours) == set(theirs), ours == theirs, gap


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", type=Path, required=True)
    parser.add_argument("--system", choices=sorted(SYSTEMS), default="longctx_full")
    parser.add_argument("--pack", type=Path, default=None, help="a published prompt pack: also search with its query")
    parser.add_argument("--users", type=int, default=None, help="the first N users (default: all)")
    args = parser.parse_args()
    run, fields, same_scores = SYSTEMS[args.system]
    judged = sorted((args.release / "output" / f"{run}_retrieve" / "recon_judge").glob("user_*.json"))
    queries = {"memaudit": dict(CATEGORY_DEFINITIONS)}
    if args.pack is not None:
        queries["published"] = category_guides(args.pack)
    totals = {name: [0, 0, 0, None, []] for name in queries}  # overlap, same set, same list, max gap, misses
    targets = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in judged[:args.users]:
            details = json.loads(path.read_text())["details"]
            store = args.release / "memory" / run / path.stem / "memories.json"
            asked = [{"id": f"{name}:{n}", "query": retrieval_query(d["category"], d["dimension"], guides)}
                     for name, guides in queries.items() for n, d in enumerate(details)]
            found = search(args.system, store, asked, Path(tmp))
            for n, d in enumerate(details):
                targets += 1
                for name in queries:
                    overlap, same_set, same, gap = compare(found[f"{name}:{n}"], d.get("retrieved_memories") or [],
                                                           fields, same_scores)
                    total = totals[name]
                    total[0], total[1], total[2] = total[0] + overlap, total[1] + same_set, total[2] + same
                    total[3] = gap if total[3] is None else max(total[3], gap or 0.0)
                    if not same:
                        total[4].append(f"{path.stem}/{d['dimension']}")
    users = len(judged[:args.users])
    for name, (overlap, same_set, same, gap, misses) in totals.items():
        scored = "" if gap is None else f"; largest score difference on a shared item {gap:.2e}"
        print(f"{args.system}, {name} query: {users} users, {targets} targets: {overlap / targets:.2f} of 5 published "
              f"items on average; the same five items for {same_set}/{targets} ({100 * same_set / targets:.1f}%), "
              f"in the same order for {same}/{targets} ({100 * same / targets:.1f}%){scored}")
        if name == "published" and misses:
            print(f"  published query, lists that differ: {', '.join(misses[:5])}")


if __name__ == "__main__":
    main()
