"""No memory system may know how it is graded: no memory-side prompt (prompts/memory_*.md) and no
text inside an adapter names a hidden category (its key or its name) or repeats our category
definitions (memaudit/bench/pool.py) or the slot-fill reader's per-category rules."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from memaudit.config import REPO_ROOT
from memaudit.types import CATEGORIES, CATEGORY_DEFINITIONS

SHINGLE = 5  # words in a row shared with a definition
# Plain-word renderings of the categories that tuned memory prompts used (issue 14).
PARAPHRASES = ("skills and experience", "what they know", "happened to them", "see themselves",
               "like to be helped", "how they are helped", "self-view", "tells us about the user")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def shingles(text: str) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i:i + SHINGLE]) for i in range(len(w) - SHINGLE + 1)}


def definition_texts() -> list[str]:
    slot_fill = (REPO_ROOT / "prompts" / "slot_fill.md").read_text()
    rules = [line for line in slot_fill.splitlines() if "label" in line and ("skill" in line or "preference" in line)]
    return [*CATEGORY_DEFINITIONS.values(), *rules]


def names() -> list[str]:
    found = []
    for key in CATEGORIES:
        spaced = key.replace("_", " ")
        found += [key, spaced, spaced.replace(" ", "-")]
    return found


def memory_side_texts() -> dict[str, str]:
    """Every memory-side prompt file, and every string literal in the adapters (prompts built in code,
    docstrings, messages)."""
    texts = {f"prompts/{p.name}": p.read_text() for p in sorted((REPO_ROOT / "prompts").glob("memory_*.md"))}
    for path in sorted((REPO_ROOT / "adapters").glob("*.py")):
        literals = [node.value for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.Constant) and isinstance(node.value, str)]
        texts[f"adapters/{path.name}"] = "\n".join(literals)
    return texts


TEXTS = memory_side_texts()


def test_the_checks_see_the_built_in_systems():
    from memaudit.adapters.registry import builtin_names, get_adapter
    from tests.adapters.conftest import installed

    declared = {f"prompts/{name}.md" for system in builtin_names() if installed(system)  # a library: none of its own
                for name in get_adapter(system).prompts}
    assert declared and declared <= set(TEXTS)


@pytest.mark.parametrize("source", sorted(TEXTS))
def test_no_category_key_or_name(source):
    text = TEXTS[source].lower()
    assert [name for name in names() if re.search(rf"\b{re.escape(name)}\b", text)] == []


@pytest.mark.parametrize("source", sorted(TEXTS))
def test_no_category_definition(source):
    shared = set().union(*(shingles(d) & shingles(TEXTS[source]) for d in definition_texts()))
    assert sorted(" ".join(s) for s in shared) == []
    assert [p for p in PARAPHRASES if p in " ".join(words(TEXTS[source]))] == []


def test_the_checks_catch_a_tuned_prompt():
    tuned = "List their skills and experience, what they know, and how they like to be helped."
    assert any(shingles(d) & shingles(tuned) for d in definition_texts())
    assert any(shingles(d) & shingles(CATEGORY_DEFINITIONS["self_model"]) for d in definition_texts())
    assert [p for p in PARAPHRASES if p in " ".join(words(tuned))]
