"""The declared layering (architecture.toml) against every import in the source, lazy ones included:
no undeclared import, no forbidden reach (direct or through other units), no cycle between units,
and no cycle between files (two modules that import each other, at the top or inside a function,
load only in one order). The performance scripts (perf/) are one unit, `perf`, held to the same rules."""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DECLARED = tomllib.loads((ROOT / "architecture.toml").read_text())


def unit(module: str) -> str | None:
    """`memaudit.llm.client` -> `llm`; `memaudit.config` -> `config`; `perf.batch` -> `perf`; None
    for anything else."""
    parts = module.split(".")
    if parts[0] == "perf":
        return "perf"
    return parts[1] if parts[0] == "memaudit" and len(parts) > 1 else None


def sources():
    """(dotted module name, file) of every module of memaudit, of adapters/ (memaudit.adapters) and
    of perf/."""
    for folder in ("memaudit", "perf"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield ".".join(path.relative_to(ROOT).with_suffix("").parts), path
    for path in sorted((ROOT / "adapters").rglob("*.py")):
        yield ".".join(("memaudit", "adapters", *path.relative_to(ROOT / "adapters").with_suffix("").parts)), path


def imported(module: str, path: Path, *, running: bool = False):
    """(imported module, line) of every import statement in the file, wherever it stands; `running`:
    those that can run (not under `if TYPE_CHECKING:`)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in statements(ast.parse(path.read_text(), str(path)), running):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            name = ".".join([*base, *([node.module] if node.module else [])])
            # `from memaudit import tables` names a unit, `from memaudit.llm import client` a module:
            # importing only submodules of a package does not need the package's own names
            names = [f"{name}.{alias.name}" for alias in node.names]
            if not all(n in MODULES for n in names):
                yield name, node.lineno
            yield from ((n, node.lineno) for n in names)


def statements(tree: ast.AST, running: bool):
    """Every node of the tree; `running`: without the bodies of `if TYPE_CHECKING:`."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if running and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, dict[str, str]]:
    """unit -> {imported unit: the first place it is imported, "path:line"}."""
    graph: dict[str, dict[str, str]] = {}
    for module, path in sources():
        source = unit(module.removesuffix(".__init__"))
        if source is None:
            continue
        edges = graph.setdefault(source, {})
        for name, line in imported(module, path):
            target = unit(name)
            if target is not None and target != source:
                edges.setdefault(target, f"{path.relative_to(ROOT)}:{line}")
    return graph


MODULES = {module.removesuffix(".__init__") for module, _ in sources()}


def module_of(name: str) -> str | None:
    """The scanned module a dotted name lives in (`memaudit.llm.client.LLM` -> `memaudit.llm.client`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def module_graph() -> dict[str, dict[str, str]]:
    """module -> {imported module: the first place it is imported, "path:line"}, for the imports
    that run (lazy ones included)."""
    graph: dict[str, dict[str, str]] = {}
    for module, path in sources():
        source = module.removesuffix(".__init__")
        edges = graph.setdefault(source, {})
        for name, line in imported(module, path, running=True):
            target = module_of(name)
            if target is not None and target != source:
                edges.setdefault(target, f"{path.relative_to(ROOT)}:{line}")
    return graph


GRAPH = import_graph()
FILES = module_graph()


def path_between(start: str, goal: str, graph: dict = GRAPH) -> list[str] | None:
    """The nodes (units, or modules of FILES) of one import chain from start to goal, or None."""
    came_from, todo = {start: None}, [start]
    while todo:
        current = todo.pop(0)
        for nxt in sorted(graph.get(current, {})):
            if nxt not in came_from:
                came_from[nxt] = current
                todo.append(nxt)
    if goal not in came_from or goal == start:
        return None
    chain = [goal]
    while chain[-1] != start:
        chain.append(came_from[chain[-1]])
    return chain[::-1]


def describe(chain: list[str], graph: dict = GRAPH) -> str:
    return " -> ".join(f"{a} ({graph[a][b]})" for a, b in zip(chain, chain[1:])) + f" -> {chain[-1]}"


def cycles(graph: dict) -> list[str]:
    """One line per import cycle of the graph."""
    found = {}
    for source, edges in sorted(graph.items()):
        for target in sorted(edges):
            if back := path_between(target, source, graph):
                found.setdefault(frozenset([source, *back]), describe([source, *back], graph))
    return sorted(found.values())


def test_every_unit_is_declared():
    allowed = DECLARED["may_import"]
    assert sorted(set(GRAPH) - set(allowed)) == [], "units without a [may_import] row in architecture.toml"
    assert sorted(set(allowed) - set(GRAPH)) == [], "rows in architecture.toml for units that do not exist"


def test_no_undeclared_import():
    allowed = DECLARED["may_import"]
    found = [f"{source} imports {target} ({where}): not in its [may_import] row"
             for source, edges in sorted(GRAPH.items()) for target, where in sorted(edges.items())
             if target not in allowed.get(source, ())]
    assert found == []


def test_no_forbidden_reach():
    found = [f"{source} reaches {target}: {describe(chain)}"
             for source, targets in sorted(DECLARED["never_reaches"].items()) for target in targets
             if (chain := path_between(source, target)) is not None]
    assert found == []


def test_no_import_cycle():
    assert cycles(GRAPH) == []


def test_no_import_cycle_between_files():
    assert cycles(FILES) == []


def test_a_lazy_import_back_is_a_file_cycle(tmp_path):
    """The check sees an import inside a function (the dialects once started the server, which
    built requests in a dialect), and not one under `if TYPE_CHECKING:`, which never runs."""
    first = "def start():\n    from memaudit.b import thing\n"
    second = "from typing import TYPE_CHECKING\nfrom memaudit.a import start\nif TYPE_CHECKING:\n    import memaudit.c\n"
    (tmp_path / "a.py").write_text(first)
    (tmp_path / "b.py").write_text(second)
    edges = {name for name, _ in imported("memaudit.a", tmp_path / "a.py")}
    back = {name for name, _ in imported("memaudit.b", tmp_path / "b.py", running=True)}
    assert "memaudit.b.thing" in edges and "memaudit.a.start" in back and "memaudit.c" not in back
    graph = {"memaudit.a": {"memaudit.b": "a.py:2"}, "memaudit.b": {"memaudit.a": "b.py:2"}}
    assert cycles(graph) == ["memaudit.a (a.py:2) -> memaudit.b (b.py:2) -> memaudit.a"]

