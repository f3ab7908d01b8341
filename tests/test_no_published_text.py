"""The repository never holds the published code's text (project rule: our own words; the exact
published prompts reach a user only through the pack built from their own checkout). Given a
checkout of the published code (MEMAUDIT_PUBLISHED_CHECKOUT, e.g. a clone of sora1998/MemProbe at
19bb836; without it the check is skipped), no run of SHINGLE words of any string in its Python
sources (prompts, templates, messages) occurs in any file the repository tracks."""
from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import pytest

from memaudit.config import REPO_ROOT

CHECKOUT = os.environ.get("MEMAUDIT_PUBLISHED_CHECKOUT")  # read at import: the test fixtures clear it
SHINGLE = 8  # words in a row: long enough that a shared run is a copy, not a common phrase
# Prose, not a list of names: a run counts when it holds at least two of these words (a list of
# labels, scenes, fields or rubric numbers, facts the protocol names, holds none).
FUNCTION_WORDS = frozenset("a an and are as be by do for from if in is it not of on or that the this to was "
                           "what when which who with you your".split())
MIN_PROMPT_CHARS = 120  # the published strings that are prompts or templates, not messages or names
MAX_FILE_BYTES = 2 * 1024 * 1024


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_]+", text.lower())


def shingles(text: str) -> set[tuple[str, ...]]:
    w = words(text)
    runs = (tuple(w[i:i + SHINGLE]) for i in range(len(w) - SHINGLE + 1))
    return {run for run in runs if sum(word in FUNCTION_WORDS for word in run) >= 2}


def published_strings(root: Path) -> dict[tuple[str, ...], str]:
    """shingle -> where in the checkout, for every string literal of its Python sources."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        if ".git" in path.parts or path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= MIN_PROMPT_CHARS:
                for shingle in shingles(node.value):
                    found.setdefault(shingle, f"{path.relative_to(root)}:{node.lineno}")
    return found


def repository_files() -> list[Path]:
    listed = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [REPO_ROOT / name for name in listed.decode().split("\0") if name]


@pytest.mark.skipif(not CHECKOUT, reason="set MEMAUDIT_PUBLISHED_CHECKOUT to a checkout of the published code")
def test_no_published_text_in_the_repository():
    published = published_strings(Path(CHECKOUT))
    assert published, "no string literals found: is MEMAUDIT_PUBLISHED_CHECKOUT a checkout of the published code?"
    copies = []
    for path in repository_files():
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        shared = shingles(text) & published.keys()
        copies += [f"{path.relative_to(REPO_ROOT)}: {' '.join(s)!r} (published {published[s]})" for s in sorted(shared)[:3]]
    assert not copies, "published text in the repository:\n" + "\n".join(copies)
