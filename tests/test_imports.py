"""The import graph of `reconciler/`: modules depend one way, so each can be read, tested and changed alone.

Every `import` counts, at module level or inside a function (a deferred import is still a dependency; hiding
a cycle in a function is how `validate` <-> `validate_jobs` went unnoticed). `reconciler/plan/` is checked by
its own test; this one covers everything else and each edge that leaves or enters plan/.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "reconciler"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the package's modules it imports (`from .x import name` names the submodule x.name when
    there is one, else x)."""
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join([*up, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                deps |= {f"{target}.{a.name}" if f"{target}.{a.name}" in files else target for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[mod] = {d for d in deps if d in files and d != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_outside_the_planner() -> None:
    """Collapse reconciler/plan/ to one node (its inner cycles are the planner's own test's), then no cycle
    may remain: not among the other modules, and not through the planner either."""
    def outer(m: str) -> str:
        return "reconciler.plan" if m.startswith("reconciler.plan.") else m

    collapsed: dict[str, set[str]] = {}
    for mod, deps in import_graph().items():
        collapsed.setdefault(outer(mod), set()).update(outer(d) for d in deps)
    for mod, deps in collapsed.items():
        deps.discard(mod)
    assert cycles(collapsed) == []


def test_the_cycle_finder_finds_a_deferred_import_cycle(tmp_path: Path) -> None:
    """The check itself can fail: a cycle closed by an import inside a function is found."""
    pkg = tmp_path / "reconciler"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import f\n")
    (pkg / "b.py").write_text("def f() -> None:\n    from . import a\n")
    (pkg / "c.py").write_text("from reconciler import a\n")
    assert cycles(import_graph(pkg)) == [["reconciler.a", "reconciler.b"]]
