"""Every test runs in its own temp dir with memaudit's environment variables cleared (and a
scheduler's, which `--shard auto` reads: a suite run inside a Slurm job tests as anywhere else)."""
from __future__ import annotations

import os

import pytest

from memaudit.config import load_settings
from memaudit.testing.fake_openai import FakeOpenAI

FAKE_URL = "http://fake.test/v1"


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
