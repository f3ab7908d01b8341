"""Batch scoring (issue 26, part 3) on the path users run: `memaudit` CLI processes against the
loopback fake of the chat, Files and Batches endpoints in its own process.

    .venv/bin/python perf/batch.py

A finished `longctx_full` rollout of the bundled sample (3 users x 31 tasks) is prepared. Then on
two copies of it: live `score --mode dump_all`, and the batch cycle (`score --batch`, `batch
status` until done, `batch collect`, once per dependent round, then `score`). Printed: the calls
and batch rounds, the live completions the `--batch` rounds made (counted at the fake: 0, the
sample's evolving criteria included, issue 33), the wall time of each batch command kind, whether the
tables and every stored response equal live scoring's, and `replay` on the batch store.
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import anyio
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memaudit.roles import RECOVERY_JUDGE, SLOT_FILL  # noqa: E402

FAKE = "memaudit.testing.fake_batches:FakeBatchAPI"
FINISHED = ("completed", "expired", "failed", "cancelled")
SCORING_ROLES = (SLOT_FILL, RECOVERY_JUDGE, f"{RECOVERY_JUDGE}:asserts", f"{RECOVERY_JUDGE}:store")


def server_process():
    """The stand-alone loopback server answering as FakeBatchAPI; (process, base URL)."""
    command = [sys.executable, "-c", "from memaudit.testing.http_server import main; main()", "--fake", FAKE]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    if not url:
        raise SystemExit("the loopback server did not start")
    return proc, url


def memaudit(url: str, db: Path, *args: str) -> tuple[float, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMAUDIT_", "OPENAI_"))}
    command = [sys.executable, str(ROOT / "memaudit.py"), "--db", str(db), "--base-url", url, "--model", "fake",
               "--backend", "openai", *args]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.strip()}")
    return took, done.stdout, done.stderr


def responses(db: Path) -> dict:
    with sqlite3.connect(db) as conn:
        marks = ",".join("?" * len(SCORING_ROLES))
        return dict(conn.execute(f"SELECT key, response FROM calls WHERE role IN ({marks})", SCORING_ROLES))


def live_completions(url: str) -> int:
    """The chat completions the fake answered over HTTP (a batch's lines are answered inside it)."""
    from memaudit.testing.http_server import stats_url

    with urllib.request.urlopen(stats_url(url), timeout=30) as answer:
        return orjson.loads(answer.read())["completions"]


def batch_cycle(url: str, db: Path) -> dict:
    times: dict[str, list[float]] = {"score --batch": [], "batch status": [], "batch collect": []}
    rounds, before = 0, live_completions(url)
    while True:
        took, _, err = memaudit(url, db, "score", "--mode", "dump_all", "--batch")
        times["score --batch"].append(took)
        if "nothing to wait for" in err:
            break
        rounds += 1
        while True:
            took, out, _ = memaudit(url, db, "batch", "status", "--json")
            times["batch status"].append(took)
            rows = [orjson.loads(line) for line in out.splitlines()]
            if all(r["collected"] or r["status"] in FINISHED for r in rows if r["batch"] is not None):
                break
        took, _, _ = memaudit(url, db, "batch", "collect")
        times["batch collect"].append(took)
    live = live_completions(url) - before
    times["score (finish)"] = [memaudit(url, db, "score", "--mode", "dump_all")[0]]
    return {"rounds": rounds, "times": times, "live": live}


async def main() -> None:
    from perf.sample_run import fresh_copy, prepare

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        prepared = tmp / "prepared.db"
        await prepare(prepared)
        proc, url = server_process()
        try:
            live_db = fresh_copy(prepared, tmp / "live" / "m.db")
            live_s = memaudit(url, live_db, "score", "--mode", "dump_all")[0]
            batch_db = fresh_copy(prepared, tmp / "batch" / "m.db")
            cycle = batch_cycle(url, batch_db)
            same_tables = (memaudit(url, live_db, "tables", "--format", "json")[1]
                           == memaudit(url, batch_db, "tables", "--format", "json")[1])
            replay = memaudit(url, batch_db, "replay")[1].strip()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        live, batched = responses(live_db), responses(batch_db)
    print(f"calls: {len(live)} live, {len(batched)} from batches, in {cycle['rounds']} batch rounds")
    print(f"live completions made by the --batch rounds: {cycle['live']}")
    print(f"live score --mode dump_all: {live_s:.2f} s")
    for name, values in cycle["times"].items():
        print(f"{name}: {len(values)} runs, {sum(values) / len(values):.2f} s each (CLI process, start-up included)")
    print(f"stored responses identical to live: {live == batched}")
    print(f"tables identical to live: {same_tables}")
    print(f"replay of the batch store: {replay}")


if __name__ == "__main__":
    anyio.run(main)
