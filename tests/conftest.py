"""Every test runs in its own temp dir with memaudit's environment variables cleared (and a
scheduler's, which `--shard auto` reads: a suite run inside a Slurm job tests as anywhere else)."""
from __future__ import annotations

import functools
import gc
import os

import pytest

from memaudit.config import load_settings
from memaudit.testing.fake_openai import FakeOpenAI

FAKE_URL = "http://fake.test/v1"


def _count_async_http_clients() -> list[int]:
    """How many of openai's async HTTP clients were made (langchain-openai's subclass them). When
    one is collected it schedules its own closing on whatever event loop is running then: collected
    inside a later test's loop, it closes connections of a loop that is closed, and that test fails
    ("Event loop is closed"). A test that made any is followed by a collection (`collect_clients`);
    only such a test, as a collection costs ~0.5 s once the libraries are loaded."""
    made = [0]
    try:
        from openai import DefaultAsyncHttpxClient
    except ImportError:
        return made
    original = DefaultAsyncHttpxClient.__init__

    @functools.wraps(original)
    def counted(self, *args, **kwargs):
        made[0] += 1
        original(self, *args, **kwargs)

    DefaultAsyncHttpxClient.__init__ = counted
    return made


ASYNC_HTTP_CLIENTS = _count_async_http_clients()


@pytest.fixture(autouse=True)
def collect_clients():
    before = ASYNC_HTTP_CLIENTS[0]
    yield
    if ASYNC_HTTP_CLIENTS[0] != before:
        gc.collect()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith(("MEMAUDIT_", "OPENAI_", "SLURM_")) or name in ("JOB_COMPLETION_INDEX", "RANK", "WORLD_SIZE"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.fixture
def fake():
    return FakeOpenAI()


@pytest.fixture
def settings(tmp_path):
    """Settings that point every role at the fake server, with fast retries."""
    from dataclasses import replace
    s = load_settings(db=tmp_path / "test.db", base_url=FAKE_URL, model="fake-model", backend="openai", env={})
    return replace(s, backoff_base=0.001, backoff_cap=0.01)
