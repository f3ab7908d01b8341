"""longctx_full: verbatim items in the published shape, the whole earlier history replayed, the
oldest messages dropped when the window is small, and retrieval parity with a direct
sentence-transformers computation."""
from __future__ import annotations

import anyio
import numpy as np
import pytest

from memaudit.adapters.base import Event
from memaudit.adapters.longctx_full import HEADROOM_TOKENS
from memaudit.llm.tokens import estimate_tokens
from tests.adapters.conftest import EPISODES, adapter_runtime, play


async def full_history(settings, fake, window):
    async with adapter_runtime("longctx_full", settings, fake, window=window) as (make, rt):
        adapter = make()
        await play(adapter, EPISODES[:2])
        # The scaffold reads memory before it stores the task being answered (the published order).
        return adapter.dump(), await adapter.context(EPISODES[2][0], 5)


def test_items_have_the_published_shape(settings, fake):
    dump, _ = anyio.run(full_history, settings, fake, None)
    assert dump[0]["content"] == f"[Task 1] {EPISODES[0][0]}"
    assert [(i["category"], i["task_index"], i["turn"]) for i in dump[:3]] == [
        ("task", 1, 0), ("agent_reply", 1, 1), ("user_reply", 1, 1)]
    assert dump[1]["content"].startswith("Agent: ") and dump[2]["content"].startswith("User: ")


def test_context_replays_every_earlier_task_in_order(settings, fake):
    _, context = anyio.run(full_history, settings, fake, None)
    task, turns = EPISODES[0]
    expected = [{"role": "user", "content": task}]
    for reply, user in turns:
        expected += [{"role": "assistant", "content": reply}, {"role": "user", "content": user}]
    assert context.history[:len(expected)] == expected
    assert len(context.history) == 5 + 3  # tasks 1 and 2; the current task is not history
    assert context.notes == [] and context.dropped == 0


def test_the_open_episode_is_never_history(settings, fake):
    async def mid_episode():
        async with adapter_runtime("longctx_full", settings, fake) as (make, rt):
            adapter = make()
            await play(adapter, EPISODES[:2])
            before = await adapter.context(EPISODES[2][0], 5)
            await adapter.observe(Event("task_start", EPISODES[2][0], 3, 0))
            await adapter.observe(Event("assistant", EPISODES[2][1][0][0], 3, 1))
            return before, await adapter.context("a follow-up", 5)
    before, during = anyio.run(mid_episode)
    assert during.history == before.history and len(before.history) == 5 + 3


def test_small_window_drops_oldest_messages(settings, fake):
    _, full = anyio.run(full_history, settings, fake, None)
    current = [{"role": "user", "content": EPISODES[2][0]}]
    window = HEADROOM_TOKENS + estimate_tokens(current) + estimate_tokens(full.history[-3:])
    _, small = anyio.run(full_history, settings, fake, window)
    assert small.dropped == len(full.history) - 3
    assert small.history == full.history[-3:]
    _, tiny = anyio.run(full_history, settings, fake, HEADROOM_TOKENS)
    assert tiny.history == [] and tiny.dropped == len(full.history)


@pytest.mark.integration
def test_scores_match_sentence_transformers(settings, fake):
    """Same model, normalisation and ordering as a direct computation: same top-5, scores to 1e-4."""
    from memaudit.adapters.base import AdapterContext
    from memaudit.adapters.longctx_full import LongContextFull
    from memaudit.llm.embed import Embedder, load_sentence_model

    query = "What kind of exercise does the user do and do they have injuries?"

    async def ours():
        adapter = LongContextFull(AdapterContext(None, Embedder(None), scope="parity"))
        await play(adapter)
        return adapter.dump(), await adapter.search(query, 5)

    dump, found = anyio.run(ours)
    model = load_sentence_model()
    contents = [i["content"] for i in dump]
    matrix = model.encode(contents, normalize_embeddings=True, convert_to_numpy=True)
    vector = model.encode([query], normalize_embeddings=True, convert_to_numpy=True)[0]
    scores = matrix @ vector
    order = np.argsort(-scores, kind="stable")[:5]
    assert [i.content for i in found] == [contents[i] for i in order]
    assert np.allclose([i.score for i in found], scores[order], atol=1e-4)
