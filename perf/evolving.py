"""Evolving banks (issue 25) on the path users run: the `memaudit` CLI in its own process against the
fake OpenAI server over real loopback HTTP (a separate process), on the bundled sample.

    .venv/bin/python perf/evolving.py                 # the sample (6 evolving entries per user)
    .venv/bin/python perf/evolving.py --static        # a static copy of the sample
    .venv/bin/python perf/evolving.py --static --root ../other-checkout

Rollout (nomem, longctx_full; every episode ends on its second reply), score --mode both, tables.
Prints: the changes of the bank and the change events each run recorded (each in exactly one
episode, the first at or after its valid_from_task?), the calls scoring made for the evolving
criteria, the `evolving` rows, and digests of the tables JSON and of the store's cache keys. With
--static the sample's histories are stripped (every entry at its initial value: the sample as it
was before evolving entries); run it with --root pointing at another checkout (e.g. main before
issue 25) to check that a static benchmark gives byte-identical tables and the same cache keys.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "memaudit" / "bench" / "data" / "sample"
BANKS = "Deeppersona/data/user_memory_banks_pooled_final.json"
SYSTEMS = "nomem,longctx_full"


def fake():
    """The served fake: the simulated user is satisfied once two assistant replies were given."""
    from memaudit.testing.fake_openai import FakeOpenAI
    from memaudit.testing.http_server import rate_every_preference

    def simulator(body: dict) -> dict:
        conversation = body["messages"][-1]["content"]
        done = conversation.count("Assistant: ") >= 2
        return {"feedback_type": "satisfied" if done else "followup",
                "text": "that works, thanks" if done else f"more detail please ({len(conversation)} chars so far)"}
    return FakeOpenAI().on("simulator", simulator).on("pref_judge", rate_every_preference)


def static_copy(target: Path) -> Path:
    """The sample with every evolving entry back at its initial value and no history."""
    shutil.copytree(SAMPLE, target)
    data = json.loads((target / BANKS).read_text())
    for user in data["users"]:
        for entries in user["memory_bank"].values():
            for e in entries:
                first = e.pop("history", [None])[0]
                if first:
                    e["short"], e["explanation"] = first["short"], first.get("explanation", e["explanation"])
    (target / BANKS).write_text(json.dumps(data, indent=2, ensure_ascii=False))
    return target


def cli(root: Path, db: Path, url: str, *args: str) -> str:
    command = [sys.executable, str(root / "memaudit.py"), "--db", str(db), "--base-url", url, "--model", "fake",
               "--backend", "openai", *args]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def report(db: Path, bench_dir: Path, tables: dict) -> None:
    data = json.loads((bench_dir / BANKS).read_text())
    expected = sorted((u["user_id"], v["valid_from_task"], e["dimension"], i) for u in data["users"]
                      for entries in u["memory_bank"].values() for e in entries
                      for i, v in enumerate(e.get("history", [])) if v["valid_from_task"] > 1)
    con = sqlite3.connect(db)
    has_changes = con.execute("SELECT 1 FROM sqlite_master WHERE name='turn_changes'").fetchone()
    print(f"bank changes: {len(expected)} over {len(data['users'])} users")
    for run in SYSTEMS.split(","):
        found = sorted(con.execute("SELECT user_id, task_idx, dimension, version FROM turn_changes WHERE run=?",
                                   (run,)).fetchall()) if has_changes else []
        print(f"  {run}: {len(found)} change events; each in exactly one episode, the first at or after its "
              f"valid_from_task: {'yes' if found == expected else 'NO'}")
    calls = con.execute("SELECT COUNT(*) FROM calls WHERE role LIKE 'recovery_judge:%'").fetchone()[0]
    total = con.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    print(f"calls for the evolving criteria: {calls} of {total} distinct calls in the store")
    for row in tables.get("evolving", []):
        print("  " + ", ".join(f"{k} {row[k]:.3f}" if isinstance(row[k], float) else f"{k} {row[k]}"
                               for k in ("run", "mode", "targets", "FAMA", "MPA", "FAA", "stale_in_store",
                                         "stale_in_recovery")))
    keys = "\n".join(k for (k,) in con.execute("SELECT key FROM calls ORDER BY key"))
    print(f"tables json sha256: {hashlib.sha256(json.dumps(tables, sort_keys=True).encode()).hexdigest()[:16]}")
    print(f"cache keys sha256: {hashlib.sha256(keys.encode()).hexdigest()[:16]} ({total} keys)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--static", action="store_true", help="a static copy of the sample (histories stripped)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose memaudit CLI runs")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from perf.loopback import server_process  # noqa: E402

    with tempfile.TemporaryDirectory() as tmp, server_process(fake="perf.evolving:fake") as url:
        bench_dir = static_copy(Path(tmp) / "sample") if args.static else SAMPLE
        db = Path(tmp) / "store.db"
        start = time.perf_counter()
        cli(args.root, db, url, "rollout", "--bench", str(bench_dir), "--systems", SYSTEMS, "--max-turns", "2")
        rolled = time.perf_counter()
        cli(args.root, db, url, "score", "--mode", "both")
        scored = time.perf_counter()
        tables = json.loads(cli(args.root, db, url, "tables", "--format", "json"))
        print(f"benchmark: {'static copy of the ' if args.static else ''}bundled sample, CLI of {args.root}, "
              f"systems {SYSTEMS}; rollout {rolled - start:.1f} s, score {scored - rolled:.1f} s")
        report(db, bench_dir, tables)


if __name__ == "__main__":
    main()
