"""Benchmark: how close `memaudit plan --from PILOT` comes to the calls a study makes (issue 33).

    .venv/bin/python perf/plan_pilot.py [--systems nomem,bm25,amem] [--pilot-users 1] [--users 3]

As a user would, through CLI processes against the loopback fake (`memaudit serve --fake`'s model):
a pilot of `--pilot-users` users (3 tasks, --max-turns 2, scored --dims targeted in both modes and
attributed), `plan` of the study with the same flags and `--users`, the study itself, then
`cost`. Printed per run: the planned calls, the calls the study made, and the difference (issue 33's
acceptance: within 25 %)."""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memaudit.testing.http_server import scripted_fake, serve  # noqa: E402

FLAGS = {"rollout": ["--tasks", "3", "--max-turns", "2"], "score": ["--mode", "both", "--dims", "targeted"],
         "attribute": ["--mode", "both"]}


def memaudit(*args: str) -> str:
    done = subprocess.run([sys.executable, str(REPO / "memaudit.py"), *args], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"memaudit {args[0]} failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def study(db: Path, url: str, systems: str, users: int) -> None:
    endpoint = ["--db", str(db), "--base-url", url, "--model", "fake"]
    memaudit("rollout", "--bench", "sample", "--systems", systems, "--users", str(users), "--quiet",
             *FLAGS["rollout"], *endpoint)
    memaudit("score", *FLAGS["score"], *endpoint)
    memaudit("attribute", *FLAGS["attribute"], *endpoint)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default="nomem,bm25,amem")
    parser.add_argument("--pilot-users", type=int, default=1)
    parser.add_argument("--users", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, serve(scripted_fake()) as url:
        pilot, study_db = Path(tmp) / "pilot.db", Path(tmp) / "study.db"
        study(pilot, url, args.systems, args.pilot_users)
        memaudit("plan", "--bench", "sample", "--systems", args.systems, "--users", str(args.users),
                 *FLAGS["rollout"], *FLAGS["score"], "--from", str(pilot), "--db", str(study_db),
                 "--base-url", url, "--model", "fake")
        study(study_db, url, args.systems, args.users)
        cost = orjson.loads(memaudit("cost", "--db", str(study_db), "--format", "json"))
    print(f"pilot of {args.pilot_users} user(s) -> study of {args.users} ({' '.join(FLAGS['rollout'])}, "
          f"--dims targeted, both modes, attributed)")
    print("| run | planned calls | calls made | difference |\n|---|---:|---:|---:|")
    worst = 0.0
    for r in cost["runs"]:
        planned = r["estimate"]["calls"]
        difference = (planned - r["calls"]) / r["calls"] if r["calls"] else 0.0
        worst = max(worst, abs(difference))
        print(f"| {r['run']} | {planned:,} | {r['calls']:,} | {difference:+.1%} |")
    print(f"largest difference: {worst:.1%} ({'within' if worst <= 0.25 else 'OVER'} 25 %)")


if __name__ == "__main__":
    main()
