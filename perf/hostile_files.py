"""Benchmark for the files a user points memaudit at (issue 36 item 7): how long each hostile file
takes to be refused, as a user meets it, by a `memaudit` process.

    .venv/bin/python perf/hostile_files.py

A store with one request waiting in a batch input file (made in this process on the fake model);
then for each hostile file one CLI process (`python memaudit.py …`) whose wall time, exit code and
stderr lines are printed: `batch collect --from` a FIFO with no writer, /dev/zero, a line whose
status_code is the string "200", a truncated line, a conflicting duplicate custom_id; `cost
--prices` a non-UTF-8 file and a FIFO; `merge --into /proc/x.db`; a `ftp://` base URL. Each must
end in one line and exit 2 within seconds (a process is given 60 s: a hang prints `hung`), and the
store's rows must be unchanged afterwards.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.config import load_settings  # noqa: E402
from memaudit.llm.batch import BatchCollector, BatchPending, submit  # noqa: E402
from memaudit.roles import ROLE_SPECS  # noqa: E402
from memaudit.runtime import open_runtime  # noqa: E402
from memaudit.store import open_store  # noqa: E402
from memaudit.testing.fake_openai import FakeOpenAI, completion  # noqa: E402

CLI = [sys.executable, str(Path(__file__).resolve().parent.parent / "memaudit.py")]
TABLES = ("calls", "batch_requests", "batches")


async def pending_store(db: Path, directory: Path) -> str:
    settings = load_settings(db=db, base_url="http://fake.test/v1", model="fake-model", backend="openai", env={})
    async with open_runtime(settings, transport=FakeOpenAI().transport()) as rt:
        with rt.llm.batching(BatchCollector(rt.store, rt.llm.refusals)):
            try:
                await rt.llm.call("slot_fill", [{"role": "user", "content": "fill"}], max_tokens=160,
                                  schema=ROLE_SPECS["slot_fill"].schema)
            except BatchPending as pending:
                key = pending.key
        await rt.store.flush()
        await submit(rt.store, settings, directory)
    return key


async def rows(db: Path) -> dict:
    async with open_store(db) as store:
        return {t: [tuple(r) for r in await store.fetchall(f"SELECT * FROM {t} ORDER BY 1")] for t in TABLES}


def line(key: str, **response) -> bytes:
    body = completion({"model": "fake-model"}, '{"label": "a", "reason": "b"}')
    return orjson.dumps({"custom_id": key, "response": {"status_code": 200, "body": body, **response}})


def cases(tmp: Path, db: Path, key: str) -> dict[str, list[str]]:
    def write(name: str, data: bytes) -> str:
        (tmp / name).write_bytes(data)
        return str(tmp / name)

    fifo = tmp / "out.fifo"
    os.mkfifo(fifo)
    collect = ["--db", str(db), "batch", "collect", "--from"]
    return {
        "batch collect --from FIFO": [*collect, str(fifo)],
        "batch collect --from /dev/zero": [*collect, "/dev/zero"],
        'batch collect --from "status_code": "200"': [*collect, write("s.jsonl", line(key, status_code="200"))],
        "batch collect --from truncated": [*collect, write("t.jsonl", line(key) + b"\n" + line("x")[:30])],
        "batch collect --from duplicate custom_id": [*collect, write("d.jsonl", line(key) + b"\n" + line(
            key, status_code=500))],
        "cost --prices non-UTF-8": ["--db", str(db), "cost", "--prices", write("p.toml", b'source = "\xff"\n')],
        "cost --prices FIFO": ["--db", str(db), "cost", "--prices", str(fifo)],
        "merge --into /proc/x.db": ["merge", str(db), "--into", "/proc/x.db"],
        "ftp:// base URL": ["--db", str(db), "--base-url", "ftp://host/v1", "--model", "m", "rollout", "--bench",
                            "sample", "--systems", "bm25"],
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        db = tmp / "store.db"
        key = anyio.run(pending_store, db, tmp / "batches")
        before = anyio.run(rows, db)
        print(f"{'hostile file':45} {'seconds':>8} {'exit':>5} {'stderr lines':>13}")
        for name, args in cases(tmp, db, key).items():
            start = time.perf_counter()
            try:
                done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, cwd=tmp)
                took, code, lines = time.perf_counter() - start, done.returncode, len(done.stderr.strip().splitlines())
                print(f"{name:45} {took:8.2f} {code:5d} {lines:13d}")
            except subprocess.TimeoutExpired:
                print(f"{name:45} {'hung':>8}")
        print("store rows unchanged:", anyio.run(rows, db) == before)


if __name__ == "__main__":
    main()
