"""No file outside adapters/ (and pyproject.toml, and the docs) names the deployed libraries in a
list: tests, `plan`, the contract and the benchmarks derive them from the registry and what each
adapter declares (adapters/deployed.py), so a new library is one adapter file plus its extra."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.adapters.conftest import deployed_libraries

ROOT = Path(__file__).resolve().parent.parent
SKIPPED = {"adapters", "docs", "node_modules"}


def python_files() -> list[Path]:
    """The project's Python files: not the adapters, nor a hidden folder (.git, the environments
    .venv and every library's .venv-<name>, caches)."""
    return sorted(p for p in ROOT.rglob("*.py") if not SKIPPED & set(parts := p.relative_to(ROOT).parts)
                  and not any(part.startswith(".") for part in parts))


def library_lists(tree: ast.AST, libraries: set[str]) -> list[int]:
    """Lines of literal lists, tuples, sets and dicts (their keys) with two or more library names."""
    found = []
    for node in ast.walk(tree):
        elements = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if not isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)) or elements is None:
            continue
        named = {e.value for e in elements if isinstance(e, ast.Constant) and e.value in libraries}
        if len(named) >= 2:
            found.append(node.lineno)
    return found


def test_no_file_outside_the_adapters_lists_the_deployed_libraries():
    libraries = set(deployed_libraries())
    assert len(libraries) >= 2, "fewer than two deployed libraries installed: nothing to look for"
    found = [f"{path.relative_to(ROOT)}:{line}" for path in python_files()
             for line in library_lists(ast.parse(path.read_text(), str(path)), libraries)]
    assert not found, f"lists of deployed libraries (derive them from the registry): {found}"


def test_the_check_sees_a_list():
    assert library_lists(ast.parse('X = ("somelib", "otherlib")\nY = {"somelib": 1, "otherlib": 2}\nZ = ["somelib"]'),
                         {"somelib", "otherlib"}) == [1, 2]
