"""A deployed library that is not installed: `memaudit systems` says which extra (or environment)
brings it, in one line, and a run of it stops before it is opened."""
from __future__ import annotations

import sys
from importlib.metadata import packages_distributions

import pytest

from memaudit.adapters.registry import load, registrations
from memaudit.errors import BadInput
from tests.adapters.conftest import adapter_class, deployed_libraries, in_own_environment


def registration(name):
    return next(r for r in registrations() if r.name == name)


def import_names(distribution: str) -> list[str]:
    """The top-level packages a distribution installs (`mem0ai` -> `mem0`)."""
    return sorted(name for name, owners in packages_distributions().items()
                  if distribution in owners and not name.startswith("_"))


@pytest.mark.parametrize("system", [s for s in deployed_libraries() if not in_own_environment(s)])
def test_a_missing_library_names_its_extra(system, monkeypatch):
    adapter = adapter_class(system)
    packages = import_names(adapter.library)
    assert packages, f"{adapter.library} installs no package"
    for package in packages:
        for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
            monkeypatch.setitem(sys.modules, name, None)  # as if not installed (an earlier test may have loaded it)
        monkeypatch.setitem(sys.modules, package, None)
    monkeypatch.delitem(sys.modules, adapter.__module__, raising=False)
    with pytest.raises(BadInput, match=rf"pip install 'memaudit-bench\[{adapter.EXTRA}\]'"):
        load(registration(system))


def test_cognee_without_its_environment_says_how_to_get_one(monkeypatch):
    monkeypatch.setenv("MEMAUDIT_COGNEE_PYTHON", "/nonexistent/python")
    monkeypatch.delitem(sys.modules, "memaudit.adapters.cognee", raising=False)
    with pytest.raises(BadInput, match=r"make install` builds .venv-cognee .*MEMAUDIT_COGNEE_PYTHON"):
        load(registration("cognee"))
