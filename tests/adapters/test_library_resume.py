"""Exact resume of every deployed library (issue 40), as users run it: a 2-user, 2-task `rollout`
against the loopback fake is SIGKILLed in the middle (the fake holds every request after half of
what an uninterrupted run asks, so the kill always meets a rollout at work) — or, for a library in
its own environment, one of its workers is — no worker process of it is alive 5 s later, and the resumed rollout stores the items of the uninterrupted one, ids
included, per user and task; `replay` prints `identical`. Slow (each process loads the library),
hence integration, once per library."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memaudit.adapters.registry import builtin_names, get_adapter
from memaudit.errors import MemauditError
from memaudit.testing.fake_openai import FakeOpenAI
from memaudit.testing.http_server import serve
from tests.adapters.conftest import script
from tests.adapters.test_environment import gone_within
from tests.adapters.test_libraries_cli import SIMULATOR_TEXT, memaudit

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
ROLLOUT = ("rollout", "--bench", "sample", "--users", "2", "--tasks", "2", "--max-turns", "2", "--quiet")
BOUND = 900  # seconds any one wait may take (a library's rollout on a busy 2-core machine)


def deployed_params() -> list:
    """Every built-in system over a deployed library; one whose library is missing, skipped (only
    a library's adapter needs more than memaudit's core to load)."""
    found = []
    for name in builtin_names():
        try:
            if get_adapter(name).library is not None:
                found.append(name)
        except MemauditError:
            found.append(pytest.param(name, marks=pytest.mark.skip(reason=f"the {name} library is not installed")))
    return found


class Gate:
    """Answers the first `limit` requests, then holds each until released."""

    def __init__(self, fake: FakeOpenAI, limit: int):
        self.limit, self.seen = limit, 0
        self.held, self.released = threading.Event(), threading.Event()
        answer = fake.reply_http

        def gated(*args):
            self.seen += 1
            if self.seen > self.limit and not self.released.is_set():
                self.held.set()
                self.released.wait(BOUND)
            return answer(*args)
        fake.reply_http = gated


def a_fake() -> FakeOpenAI:
    return script(FakeOpenAI()).on("simulator", lambda body: {"feedback_type": "followup", "text": SIMULATOR_TEXT})


def items(db: Path) -> dict:
    with sqlite3.connect(db) as con:
        return {(user, task): stored for user, task, stored in
                con.execute("SELECT user_id, task_idx, items FROM snapshots ORDER BY user_id, task_idx")}


def children(pid: int) -> list[int]:
    """The processes `pid` started (a library's workers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def command(db: Path, url: str, system: str) -> list[str]:
    return [sys.executable, str(REPO / "memaudit.py"), "--db", str(db), "--base-url", url, "--model", "fake",
            *ROLLOUT, "--systems", system]


def kill_cases() -> list:
    """(system, what is killed): memaudit for every library; for a library in its own environment
    also one of its workers (memaudit then stops with one line)."""
    cases = []
    for param in deployed_params():
        name = param if isinstance(param, str) else param.values[0]
        marks = () if isinstance(param, str) else param.marks
        cases.append(pytest.param(name, "memaudit", marks=marks, id=f"{name}-memaudit"))
        if isinstance(param, str) and get_adapter(name).ENVIRONMENT is not None:
            cases.append(pytest.param(name, "worker", id=f"{name}-worker"))
    return cases


@pytest.mark.parametrize(("system", "victim"), kill_cases())
def test_a_rollout_killed_mid_way_resumes_to_the_uninterrupted_items(system, victim, tmp_path):
    whole, resumed = tmp_path / "whole.db", tmp_path / "resumed.db"
    fake = a_fake()
    with serve(fake) as url:
        memaudit(whole, url, *ROLLOUT, "--systems", system)
    asked = len(fake.requests)
    fake = a_fake()
    gate = Gate(fake, asked // 2)
    with serve(fake) as url:
        process = subprocess.Popen(command(resumed, url, system), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            assert gate.held.wait(BOUND), "the rollout never reached the held request"
            workers = children(process.pid)
            if victim == "worker":
                os.kill(workers[0], signal.SIGKILL)
                gate.released.set()
                assert process.wait(BOUND) != 0, "a killed worker stops the rollout"
        finally:
            process.kill()
            process.wait(BOUND)
            gate.released.set()
        alive = [pid for pid in workers if not gone_within(pid, 5)]
        assert alive == [], f"workers {alive} outlived their memaudit"
        assert len(items(resumed)) < len(items(whole)), "killed mid-way"
        memaudit(resumed, url, *ROLLOUT, "--systems", system)
    assert items(resumed) == items(whole)
    assert memaudit(resumed, "http://127.0.0.1:9/v1", "replay").strip().endswith("identical")
