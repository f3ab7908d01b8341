"""The declared layering (architecture.toml) against every import in the source, lazy ones included:
no undeclared import, no forbidden reach (direct or through other units), no cycle between units.
The performance scripts (perf/) are one unit, `perf`, held to the same rules."""
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


def imported(module: str, path: Path):
    """(imported module, line) of every import statement in the file, wherever it stands."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            name = ".".join([*base, *([node.module] if node.module else [])])
            yield name, node.lineno
            # `from memaudit import tables` names a unit in the imported names
            yield from ((f"{name}.{alias.name}", node.lineno) for alias in node.names if name == "memaudit")


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


GRAPH = import_graph()


def path_between(start: str, goal: str) -> list[str] | None:
    """The units of one import chain from start to goal, or None."""
    came_from, todo = {start: None}, [start]
    while todo:
        current = todo.pop(0)
        for nxt in sorted(GRAPH.get(current, {})):
            if nxt not in came_from:
                came_from[nxt] = current
                todo.append(nxt)
    if goal not in came_from or goal == start:
        return None
    chain = [goal]
    while chain[-1] != start:
        chain.append(came_from[chain[-1]])
    return chain[::-1]


def describe(chain: list[str]) -> str:
    return " -> ".join(f"{a} ({GRAPH[a][b]})" for a, b in zip(chain, chain[1:])) + f" -> {chain[-1]}"


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
    found = {}
    for source, edges in sorted(GRAPH.items()):
        for target in sorted(edges):
            if back := path_between(target, source):
                found.setdefault(frozenset([source, *back]), describe([source, *back]))
    assert sorted(found.values()) == []


def test_the_tables_and_the_report_never_reach_the_model_client():
    for source in ("tables", "report"):
        assert "llm" in DECLARED["never_reaches"][source]


def test_the_performance_scripts_are_checked():
    assert "perf" in GRAPH and GRAPH["perf"], "perf/ imports nothing of memaudit: is it still scanned?"
