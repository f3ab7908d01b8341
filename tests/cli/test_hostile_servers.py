"""Issue 42, findings 3-5 through the command line against a loopback server: tool arguments nested
5,000 deep are counted write failures and `replay` prints `identical`; a server that calls tools
only when one is named stops a langmem rollout with one line; a run whose library's tool requests
never got a call says so in one line and counts them in Table 2's write failures; usage of 1e20 tokens, with and
without `--tpm`, is unknown tokens, never a traceback."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from memaudit.llm.tools import PROBE_TOOL
from memaudit.testing.fake_openai import FakeOpenAI
from memaudit.testing.http_server import serve
from tests.adapters.conftest import needs_library, script

REPO = Path(__file__).resolve().parents[2]
DEEP = '{"content": ' * 5000 + '"x"' + "}" * 5000
ROLLOUT = ["rollout", "--bench", "sample", "--users", "1", "--tasks", "1", "--max-turns", "2", "--quiet"]
pytestmark = pytest.mark.integration


def memaudit(db: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "memaudit.py"), "--db", str(db), "--base-url", url,
                           "--model", "fake", *args], capture_output=True, text=True, timeout=900, env=dict(os.environ))


class DeepArguments(FakeOpenAI):
    """Every tool call's arguments nested 5,000 deep."""

    def completion(self, body, text, calls=None):
        for call in calls or []:
            call["function"]["arguments"] = DEEP
        return super().completion(body, text, calls)


class CallsOnlyWhenProbed(FakeOpenAI):
    """Passes memaudit's tool probes, then answers every library tool request in text."""

    def completion(self, body, text, calls=None):
        if calls and calls[0]["function"]["name"] != PROBE_TOOL:
            return super().completion(body, "Noted, nothing to record.")
        return super().completion(body, text, calls)


class HugeUsage(FakeOpenAI):
    def completion(self, body, text, calls=None):
        answer = super().completion(body, text, calls)
        answer["usage"].update(prompt_tokens=1e20, completion_tokens=1e20, total_tokens=2e20)
        return answer


@needs_library("langmem")
def test_tool_arguments_nested_5000_deep_are_counted_and_replay_is_identical(tmp_path):
    db = tmp_path / "m.db"
    with serve(script(DeepArguments())) as url:
        done = memaudit(db, url, *ROLLOUT, "--systems", "langmem")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "memory writes lost" in done.stdout, done.stdout
    replayed = memaudit(db, url, "replay")
    assert replayed.returncode == 0 and replayed.stdout.strip().endswith("identical"), replayed.stdout + replayed.stderr


@needs_library("langmem")
def test_a_server_calling_tools_only_when_named_stops_langmem_with_one_line(tmp_path):
    fake = script(FakeOpenAI())
    fake.tools_only_when_named = True
    with serve(fake) as url:
        done = memaudit(tmp_path / "m.db", url, *ROLLOUT, "--systems", "langmem")
    said = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(said) == 1 and "only when the request names it" in said[0], done.stderr


@needs_library("langmem")
def test_a_run_whose_tool_requests_never_got_a_call_says_so_and_counts_them(tmp_path):
    db = tmp_path / "m.db"
    with serve(script(CallsOnlyWhenProbed())) as url:
        done = memaudit(db, url, *ROLLOUT, "--systems", "langmem")
        tables = memaudit(db, url, "tables", "--format", "json")
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if "never got a tool call" in line]
    assert len(said) == 1 and "user_001" in said[0], done.stdout
    (row,) = orjson.loads(tables.stdout)["table2"]
    assert row["memory_write_failures"] >= 1
    assert memaudit(db, url, "replay").stdout.strip().endswith("identical")


@pytest.mark.parametrize("tpm", [[], ["--tpm", "1000000"]])
def test_usage_of_1e20_tokens_is_unknown_never_a_traceback(tmp_path, tpm):
    with serve(script(HugeUsage())) as url:
        done = memaudit(tmp_path / "m.db", url, *ROLLOUT, "--systems", "nomem", *tpm)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        cost = memaudit(tmp_path / "m.db", url, "cost")
    assert cost.returncode == 0 and "unknown" in cost.stdout.lower(), cost.stdout + cost.stderr
