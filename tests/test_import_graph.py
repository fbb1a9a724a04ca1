"""Imports inside spur/ run one way: no module imports, directly or through others, a module that
imports it back.

Every import counts, wherever it is written: at the top, inside a function, or under
``if TYPE_CHECKING:`` (a cycle a type checker sees is still a cycle between the two modules'
designs). ``from package import name`` counts as an import of ``package.name`` when that is a module,
else of ``package`` (its ``__init__``); a package's ``__init__`` running first is not counted, as
Python does not re-enter it. The graph is read from the source with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "spur"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package) for every module under spur/."""
    mods: dict[str, tuple[Path, bool]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        mods[".".join(parts)] = (path, is_pkg)
    return mods


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> Iterator[str]:
    """The dotted name of each target of an import statement (``module.name`` for a from-import)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    else:
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for alias in node.names:
            yield f"{module}.{alias.name}"


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported spur module: line of the first such import}."""
    mods = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_pkg) in mods.items():
        package = name if is_pkg else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _imported(node, package):
                if target.split(".")[0] != "spur":
                    continue
                found = resolve(target)
                if found is not None and found != name:
                    edges.setdefault(found, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One shortest cycle through each strongly connected set of modules (Tarjan, then BFS)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for component in components:
        start = min(component)
        paths = {start: [start]}
        queue = [start]
        cycle: list[str] | None = None
        while queue and cycle is None:
            v = queue.pop(0)
            for w in sorted(graph[v]):
                if w == start:
                    cycle = paths[v] + [start]
                    break
                if w in component and w not in paths:
                    paths[w] = paths[v] + [w]
                    queue.append(w)
        assert cycle is not None
        found.append(cycle)
    return found


def _describe(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    return "\n".join(
        f"  {a} (line {graph[a][b]}) imports {b}" for a, b in zip(cycle, cycle[1:], strict=False)
    )


def test_no_import_cycle_between_modules() -> None:
    graph = import_graph()
    assert len(graph) > 200 and "spur.controller.app" in graph  # the walk saw the package
    found = cycles(graph)
    assert not found, "import cycles in spur/:\n" + "\n\n".join(_describe(graph, c) for c in found)


def test_checker_sees_type_checking_and_local_imports() -> None:
    graph = {"a": {"b": 3}, "b": {"c": 5}, "c": {"a": 9}, "d": {"a": 1}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    # The real graph: a TYPE_CHECKING import (controller parts -> host) and a function-local one
    # (cli.main -> cli.app) are both edges.
    real = import_graph()
    assert "spur.controller.host" in real["spur.controller.service"]
    assert "spur.cli.app" in real["spur.cli.main"]
    assert "spur.state.domain" in real["spur.state.machine"]
