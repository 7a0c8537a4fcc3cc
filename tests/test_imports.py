"""The import graph of `reconciler/` has no cycle: every import counts, at module level, inside functions and
under `TYPE_CHECKING` alike (a cycle hidden behind a lazy import is still two modules that cannot be
understood, tested or changed one without the other)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "reconciler"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the modules of the package it imports (`from pkg import mod` counts as importing pkg.mod)."""
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in files else source for a in node.names]
            graph[mod].update(t for t in targets if t in files and t != mod)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_checker_sees_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "reconciler"
    (pkg / "plan").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "plan" / "__init__.py").write_text("from .a import x\n")
    (pkg / "plan" / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import y\n")
    (pkg / "plan" / "b.py").write_text("def f():\n    from . import a\n    from .. import plan\n")
    graph = import_graph(pkg)
    assert graph["reconciler.plan.b"] == {"reconciler.plan.a", "reconciler.plan"}
    assert cycles(graph) == [["reconciler.plan", "reconciler.plan.a", "reconciler.plan.b"]]


def test_no_import_cycle_outside_the_planner() -> None:
    """Collapse reconciler/plan/ to one node (the planner's inner graph is its own refactor's), then no cycle
    may remain: not among the other modules (`validate` <-> `validate_jobs` was one), nor through the planner."""
    def outer(m: str) -> str:
        return "reconciler.plan" if m.startswith("reconciler.plan.") else m

    collapsed: dict[str, set[str]] = {}
    for mod, deps in import_graph().items():
        collapsed.setdefault(outer(mod), set()).update(outer(d) for d in deps)
    for mod, deps in collapsed.items():
        deps.discard(mod)
    assert cycles(collapsed) == []


def test_reconciler_has_no_import_cycle() -> None:
    graph = import_graph()
    assert {"reconciler.plan.state", "reconciler.plan.greedy"} <= graph["reconciler.plan.planner"]
    assert cycles(graph) == []
