"""A deployed library that is not installed: `memaudit systems` says which extra (or environment)
brings it, in one line, and a run of it stops before it is opened."""
from __future__ import annotations

import sys

import pytest

from memaudit.adapters.registry import load, registrations
from memaudit.errors import BadInput

LIBRARY_MODULES = {"graphiti": "graphiti_core", "langmem": "langmem", "llamaindex": "llama_index", "mem0ai": "mem0"}


def registration(name):
    return next(r for r in registrations() if r.name == name)


@pytest.mark.parametrize("system", sorted(LIBRARY_MODULES))
def test_a_missing_library_names_its_extra(system, monkeypatch):
    package = LIBRARY_MODULES[system]
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed (an earlier test may have loaded it)
    monkeypatch.setitem(sys.modules, package, None)
    monkeypatch.delitem(sys.modules, f"memaudit.adapters.{system}", raising=False)
    with pytest.raises(BadInput, match=rf"pip install 'memaudit-bench\[{system}\]'"):
        load(registration(system))


def test_cognee_without_its_environment_says_how_to_get_one(monkeypatch):
    monkeypatch.setenv("MEMAUDIT_COGNEE_PYTHON", "/nonexistent/python")
    monkeypatch.delitem(sys.modules, "memaudit.adapters.cognee", raising=False)
    with pytest.raises(BadInput, match=r"make install` builds .venv-cognee .*MEMAUDIT_COGNEE_PYTHON"):
        load(registration("cognee"))
