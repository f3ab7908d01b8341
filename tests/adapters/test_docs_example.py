"""The adapter example in docs/adapters.md is real code: it runs through the built-in checks."""
from __future__ import annotations

import re
from pathlib import Path

import anyio

from memaudit.adapters.base import AdapterContext
from memaudit.llm.embed import Embedder
from tests.adapters.conftest import EPISODES, hash_encoder, play

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"


def example_class():
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    assert 30 <= len(code.strip().splitlines()) <= 50
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace["UserNotes"]


def test_docs_example_is_a_working_adapter():
    cls = example_class()

    async def main():
        embedder = Embedder(None, encoder=hash_encoder)
        adapter = cls(AdapterContext(None, embedder, scope="docs/u1"))
        await play(adapter)
        assert len(adapter.dump()) == sum(1 + len(turns) for _, turns in EPISODES)
        found = await adapter.search("knee injury running", 3)
        assert len(found) == 3 and found[0].score >= found[-1].score
        restored = cls(AdapterContext(None, embedder, scope="docs/u1"))
        await restored.restore(adapter.snapshot())
        assert restored.dump() == adapter.dump()
        assert await restored.search("Python", 2) == await adapter.search("Python", 2)
        assert restored.new_id("x") == adapter.new_id("x")
    anyio.run(main)
