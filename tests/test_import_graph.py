"""Imports inside spur/ run one way, between modules and between packages.

Modules: no module imports, directly or through others, a module that imports it back.

Packages: every module counts as its package, ``spur.X`` (a top-level subpackage, or a top-level
module such as ``spur.startup``), and no package imports, directly or through others, a package that
imports it back. One package is finer: ``spur.k8s`` is only a namespace over two packages that share
nothing, ``spur.k8s.cluster`` (the k0s lifecycle library: spurd runs its renderer and installer,
spurctld its service and reconciler) and ``spur.k8s.operator`` (the spur-k8s-operator program, whose
virtual agent reuses spurd's parts), so each counts on its own (``SPLIT``); lumped together they would
sit both below and above spur.agent. A failure lists every set of packages that import each other,
with the module imports that make each edge.

Beyond having no cycle, the packages keep one order, lowest first (``LAYERS``); a package imports only
packages of lower layers, never one of its own layer:

 0. ``spur`` (the package itself), ``spur.version``, ``spur.lazymodule``, ``spur.trace``,
    ``spur.sdnotify``, ``spur.core``: leaves that import nothing of Spur (core is the pure domain:
    jobs, resources, time specs, eligibility, squeue's array rows);
 1. ``spur.hookspecs`` (the plugin contract), ``spur.rpc`` (the wire: protobuf, gRPC over h2, TLS and
    certificates, conversions between domain and wire, leader forwarding, channel pools);
 2. ``spur.plugins`` (finding plugins), ``spur.net`` (the WireGuard mesh, on the mesh wire messages);
 3. ``spur.config`` (spur.conf; it validates mesh endpoints with spur.net);
 4. ``spur.accounting`` (accounting rules, priority and fair share, the PostgreSQL store);
 5. ``spur.state`` (the replicated state machine, built on core and accounting);
 6. ``spur.auth`` (credentials, the admin rule, the callers' gate; reads revocations from state);
 7. ``spur.raft`` (consensus; authenticates its peers), ``spur.rest`` (slurmrestd's mapping),
    ``spur.k8s`` and ``spur.k8s.cluster``;
 8. ``spur.startup`` (the daemons' start-up failures, Raft storage among them), ``spur.metrics``,
    ``spur.ui`` (the dashboard, on the REST app);
 9. ``spur.agent`` (spurd), ``spur.controller`` (spurctld: its services, leader duties and wiring);
10. ``spur.k8s.operator``, ``spur.cli``: programs that reuse the daemons' parts (the virtual agent
    spurd's reporter; the commands spurd's job environment and both daemons' flags for man pages).

A package that is in no layer fails the check until it is given one. How the checks read imports:
every import counts, wherever it is written: at the top, inside a function, or under
``if TYPE_CHECKING:`` (a cycle a type checker sees is still a cycle between the two modules'
designs). ``from package import name`` counts as an import of ``package.name`` when that is a module,
else of ``package`` (its ``__init__``); a package's ``__init__`` running first is not counted, as
Python does not re-enter it. The graph is read from the source with ``ast``; nothing is imported.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
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


def components(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """The strongly connected sets of more than one node (Tarjan): each is one or more cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
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
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One shortest cycle through each strongly connected set of modules (Tarjan, then BFS)."""
    found = []
    for component in components(graph):
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


# Packages, lowest layer first (see the module docstring).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("spur", "spur.version", "spur.lazymodule", "spur.trace", "spur.sdnotify", "spur.core"),
    ("spur.hookspecs", "spur.rpc"),
    ("spur.plugins", "spur.net"),
    ("spur.config",),
    ("spur.accounting",),
    ("spur.state",),
    ("spur.auth",),
    ("spur.raft", "spur.rest", "spur.k8s", "spur.k8s.cluster"),
    ("spur.startup", "spur.metrics", "spur.ui"),
    ("spur.agent", "spur.controller"),
    ("spur.k8s.operator", "spur.cli"),
)

# Packages whose subpackages count on their own (see the module docstring).
SPLIT = ("spur.k8s",)


def package_of(module: str) -> str:
    """The package a module counts as: ``spur.X``, or ``spur.X.Y`` inside a package of SPLIT."""
    parts = module.split(".")
    for split in SPLIT:
        depth = split.count(".") + 1
        if parts[:depth] == split.split(".") and len(parts) > depth:
            return ".".join(parts[: depth + 1])
    return ".".join(parts[:2])


Edge = tuple[str, int, str]  # importing module, line, imported module


def package_graph(graph: dict[str, dict[str, int]]) -> dict[str, dict[str, list[Edge]]]:
    """package -> {imported package: the module imports that make the edge}, packages as
    :func:`package_of` names them; a package's imports of itself are left out."""
    packages: dict[str, dict[str, list[Edge]]] = {package_of(m): {} for m in graph}
    for module, edges in sorted(graph.items()):
        for target, line in sorted(edges.items()):
            a, b = package_of(module), package_of(target)
            if a != b:
                packages[a].setdefault(b, []).append((module, line, target))
    return packages


def _edge_lines(edges: Iterable[Edge]) -> list[str]:
    return [f"    {module} (line {line}) imports {target}" for module, line, target in edges]


def package_cycles_report(packages: dict[str, dict[str, list[Edge]]]) -> str:
    """Every strongly connected set of packages, with each package edge inside it and the module
    imports that make that edge; empty when the packages form no cycle."""
    out = []
    for component in sorted(components(packages), key=min):
        out.append(f"packages that import each other: {', '.join(sorted(component))}")
        for a in sorted(component):
            for b in sorted(packages[a]):
                if b in component:
                    out.append(f"  {a} -> {b}")
                    out.extend(_edge_lines(packages[a][b]))
    return "\n".join(out)


def test_no_import_cycle_between_packages() -> None:
    packages = package_graph(import_graph())
    assert {"spur.core", "spur.controller", "spur.k8s.cluster", "spur.k8s.operator"} <= set(packages)
    report = package_cycles_report(packages)
    assert not report, (
        "import cycles between packages of spur/ (test_packages_import_only_lower_layers names the"
        " imports that point up):\n" + report
    )


def test_packages_import_only_lower_layers() -> None:
    rank = {package: i for i, layer in enumerate(LAYERS) for package in layer}
    packages = package_graph(import_graph())
    unplaced = sorted(set(packages) - set(rank))
    assert not unplaced, f"give each package its layer in LAYERS (tests/test_import_graph.py): {unplaced}"
    upward = []
    for a, targets in sorted(packages.items()):
        for b, edges in sorted(targets.items()):
            if rank[b] >= rank[a]:
                upward.append(f"  {a} (layer {rank[a]}) -> {b} (layer {rank[b]})")
                upward.extend(_edge_lines(edges))
    assert not upward, "imports that do not point to a lower layer:\n" + "\n".join(upward)


def test_package_check_collapses_modules_and_names_the_module_imports() -> None:
    assert package_of("spur.rpc.proto.spur_pb2") == "spur.rpc"
    assert package_of("spur.startup") == "spur.startup"
    assert package_of("spur.k8s.cluster.render") == "spur.k8s.cluster"
    assert package_of("spur.k8s") == "spur.k8s"
    graph = {
        "spur.a.x": {"spur.a.y": 1, "spur.b.z": 7},
        "spur.a.y": {},
        "spur.b.z": {"spur.c": 4},
        "spur.c": {"spur.a.y": 2},
        "spur.d": {"spur.a.x": 3},
    }
    packages = package_graph(graph)
    assert packages["spur.a"] == {"spur.b": [("spur.a.x", 7, "spur.b.z")]}
    assert components(packages) == [{"spur.a", "spur.b", "spur.c"}]
    report = package_cycles_report(packages)
    assert "packages that import each other: spur.a, spur.b, spur.c" in report
    assert "    spur.c (line 2) imports spur.a.y" in report
    assert "spur.d" not in report
