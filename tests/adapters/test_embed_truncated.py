"""No silent truncation: every text a memory system's embedding model cuts at its window is
counted for that system (its snapshot's `embed_truncated`, each text once, also across a restore),
by the bundled model's own tokenizer; an embedder whose window is not known counts nothing and says
so (no key: n/a), never 0."""
from __future__ import annotations

import anyio

from memaudit.adapters.base import AdapterContext, Event
from memaudit.adapters.registry import get_adapter
from memaudit.llm.embed import Embedder, sentence_window
from memaudit.types import EMBED_TRUNCATED
from tests.adapters.conftest import adapter_runtime

# ~1,500 characters: past the bundled model's 256 tokens.
LONG = " ".join(["I train for a half marathon on Tuesdays and my left knee aches after long runs."] * 19)
SHORT = "I like short answers."


def test_the_bundled_window_is_read_from_its_own_files():
    window = sentence_window(Embedder().model_name)
    assert window.tokens == 256
    assert len(LONG) > 1400 and window.cuts(LONG) and not window.cuts(SHORT)


async def fed(adapter) -> None:
    await adapter.observe(Event("task_start", LONG, 1, 0))
    await adapter.observe(Event("user", SHORT, 1, 1))
    await adapter.search(LONG, 3)  # a query is embedded too


def test_simple_rag_counts_what_the_bundled_model_cuts(settings, fake):
    async def main():
        async with adapter_runtime("simple_rag", settings, fake) as (_, rt):
            embedder = Embedder(None, encoder=rt.embedder.encoder, window=lambda: sentence_window(Embedder().model_name))
            make = lambda: get_adapter("simple_rag")(AdapterContext(rt.llm, embedder, scope="run/u1"))  # noqa: E731
            adapter = make()
            await fed(adapter)
            state = adapter.snapshot()
            assert state[EMBED_TRUNCATED] == 1  # the long message, stored and searched: one text
            restored = make()
            await restored.restore(state)
            await restored.search(LONG, 3)
            assert restored.snapshot()[EMBED_TRUNCATED] == 1
    anyio.run(main)


def test_an_embedder_without_a_known_window_counts_nothing(settings, fake):
    async def main():
        async with adapter_runtime("simple_rag", settings, fake) as (make, _):
            adapter = make()  # the tests' hashing encoder: no window
            await fed(adapter)
            assert EMBED_TRUNCATED not in adapter.snapshot()
    anyio.run(main)
