"""`memaudit plan --shards 3 --emit slurm --out DIR`, then `bash DIR/submit.sh`, on a real single-node
Slurm (scripts/slurm_local.sh; .ci/run installs and starts it) against the loopback fake: DIR/study.db
has the tables of the same study run unsharded and the plan's estimate (for `cost`), the API key
reached the jobs from the environment and is nowhere in DIR, and the merge refuses a shard left
out, naming it.

Without a Slurm that takes jobs the test skips and says why; with MEMAUDIT_REQUIRE_SLURM=1 (CI) it
fails instead, so CI never passes without having run it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import orjson
import pytest

from memaudit.cli import main
from memaudit.testing.http_server import scripted_fake, serve
from tests.study.test_merge import tables

pytestmark = pytest.mark.integration

REQUIRED = os.environ.get("MEMAUDIT_REQUIRE_SLURM") == "1"  # read before the isolating fixture clears it
SECRET = "sk-slurm-test-key-never-in-a-file"
REPO = Path(__file__).resolve().parents[2]
FLAGS = {"rollout": ["--bench", "sample", "--systems", "nomem,bm25", "--users", "3", "--tasks", "2",
                     "--max-turns", "2"],
         "score": ["--mode", "both", "--dims", "targeted"], "attribute": ["--mode", "both"]}
WAIT = 900  # seconds: a bound on a stuck scheduler, not a timing the test depends on


def slurm_missing() -> str | None:
    """Why no Slurm can run the jobs here, or None."""
    if shutil.which("sbatch") is None:
        return "sbatch is not installed (scripts/slurm_local.sh install)"
    found = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30)
    states = found.stdout.split()
    if found.returncode or not any(s.rstrip("*") in ("idle", "mixed", "allocated") for s in states):
        return f"no Slurm node takes jobs ({found.stderr.strip() or states}; scripts/slurm_local.sh start)"
    return None


@pytest.fixture
def slurm():
    reason = slurm_missing()
    if reason is not None:
        if REQUIRED:
            pytest.fail(f"MEMAUDIT_REQUIRE_SLURM=1 but {reason}")
        pytest.skip(reason)


def wait_for(job: str, logs: Path) -> None:
    """Until `job` has left the queue; a dependency that can never be met (a shard failed) fails."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T %r"], capture_output=True, text=True)
        if not state.stdout.strip():
            return
        if "DependencyNeverSatisfied" in state.stdout:
            subprocess.run(["scancel", job])
            pytest.fail("a shard failed:\n" + "\n".join(p.read_text()[-2000:] for p in sorted(logs.glob("*.out"))))
        time.sleep(2)
    pytest.fail(f"Slurm job {job} still queued after {WAIT} s")


def test_the_emitted_slurm_study_has_the_unsharded_tables_and_no_key(slurm, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    fake = scripted_fake()
    fake.api_key = SECRET  # a job without the key would be refused: it travels by environment
    out, whole = tmp_path / "study", tmp_path / "whole.db"
    with serve(fake) as url:
        endpoint = ["--base-url", url, "--model", "fake"]
        for stage in ("rollout", "score", "attribute"):
            main([stage, *FLAGS[stage], "--db", str(whole), *endpoint])
        main(["plan", *FLAGS["rollout"], *FLAGS["score"], "--shards", "3", "--emit", "slurm", "--out", str(out),
              "--cpus", "1", "--mem-gb", "1", "--time", "00:20:00", "--db", str(tmp_path / "plan.db"), *endpoint])
        submitted = subprocess.run(["bash", str(out / "submit.sh")], capture_output=True, text=True, check=True)
        merge_job = submitted.stdout.split("merge job ")[1].split()[0]
        wait_for(merge_job, out / "logs")
    assert "merged" in (out / "logs" / "merge.out").read_text(), (out / "logs" / "merge.out").read_text()
    study = anyio.run(tables, out / "study.db")
    assert study == anyio.run(tables, whole) and [r["run"] for r in study["table2"]] == ["bm25", "nomem"]
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path

    cost = subprocess.run([sys.executable, str(REPO / "memaudit.py"), "cost", "--db", str(out / "study.db"),
                           "--format", "json"], capture_output=True, text=True, check=True)
    assert all(r["estimate"] is not None for r in orjson.loads(cost.stdout)["runs"])  # the plan rode in bench.db

    capsys.readouterr()
    left_out = [str(out / "shards" / f"shard-{i}.db") for i in (1, 3)]
    refused = subprocess.run([sys.executable, str(REPO / "memaudit.py"), "merge", *left_out, "--into",
                              str(tmp_path / "partial.db")], capture_output=True, text=True)
    assert refused.returncode == 2 and "shard 2 of 3: no attribute, rollout, score" in refused.stderr
    assert not (tmp_path / "partial.db").exists()
