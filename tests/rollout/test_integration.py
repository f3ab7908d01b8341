"""A tiny rollout end to end on the embedded model (slow: starts llama.cpp)."""
from __future__ import annotations

import importlib.util

import pytest

from memaudit.config import load_settings
from memaudit.llm.embed import Embedder
from memaudit.rollout.runner import run_rollout
from memaudit.runtime import open_runtime
from tests.rollout.conftest import fake_encoder, make_bench

pytestmark = [pytest.mark.integration, pytest.mark.anyio,
              pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                 reason="llama-cpp-python is not installed")]


async def test_tiny_rollout_on_the_embedded_model(tmp_path):
    settings = load_settings(db=tmp_path / "real.db", env={})
    bench = make_bench(n_users=1, n_tasks=1)
    async with open_runtime(settings, embedder=Embedder(None, encoder=fake_encoder)) as rt:
        assert await run_rollout(rt, bench, ["nomem"], max_turns=2, progress=False) == ["nomem"]
        (episode,) = await rt.store.episodes.load("nomem")
    assert episode.end_reason in ("satisfied", "max_turns", "failed")
    assert episode.end_reason == "failed" or 1 <= len(episode.turns) <= 2
    for turn in episode.turns:
        assert turn.assistant.strip()
        assert turn.preference_score is None or 1 <= turn.preference_score <= 5
