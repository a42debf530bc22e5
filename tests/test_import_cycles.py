"""No import cycles inside ``pi_kernel``, imports inside functions included.

An AST scan of every module: each ``import`` / ``from ... import`` naming a
``pi_kernel`` module is an edge. A cycle hidden by an import inside a function
is still a cycle: the two modules cannot be understood, or loaded, one without
the other. So is a cycle through imports under ``if TYPE_CHECKING:`` (they
never run, but the modules still name each other's concepts): the second scan
counts those too.

The same scan keeps imports at the top of modules: an import of a ``pi_kernel``
module inside a function must be explained by its module's docstring
(``test_imports_inside_functions_are_explained`` states the rule).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pi_kernel"


def module_names() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    return hidden


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join(anchor + ([node.module] if node.module else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def import_graph(type_only_too: bool = False) -> dict[str, set[str]]:
    """Module → the ``pi_kernel`` modules it imports (``type_only_too``: also under ``TYPE_CHECKING``)."""
    modules = module_names()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        hidden = set() if type_only_too else _type_checking_nodes(tree)
        edges: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in hidden or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for name in _imported(node, module, path.name == "__init__.py"):
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                # A package's own submodules, and a module's parents, are not edges of their own.
                if name and name != module and not module.startswith(name + "."):
                    edges.add(name)
        graph[module] = edges
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_the_scan_finds_a_cycle() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_the_scan_sees_imports_inside_functions() -> None:
    graph = import_graph()
    assert "pi_kernel.ai" in graph["pi_kernel.tools.definition"]
    assert all(module.startswith("pi_kernel") for edges in graph.values() for module in edges)


def test_pi_kernel_has_no_import_cycles() -> None:
    cycles = find_cycles(import_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(cycle) for cycle in cycles)


def test_the_type_checking_scan_sees_imports_for_type_checkers() -> None:
    """``turn`` names ``ApprovalRequest`` for mypy only: the second scan has the edge, the first has not."""
    assert "pi_kernel.tools.approval" not in import_graph()["pi_kernel.kernel.turn"]
    assert "pi_kernel.tools.approval" in import_graph(type_only_too=True)["pi_kernel.kernel.turn"]


def test_pi_kernel_has_no_import_cycles_even_through_imports_for_type_checkers() -> None:
    cycles = find_cycles(import_graph(type_only_too=True))
    assert cycles == [], "import cycles (type-only included): " + "; ".join(" <-> ".join(c) for c in cycles)


LAZY_PHRASE = "imported lazily"


def function_level_imports(tree: ast.Module, module: str, is_package: bool) -> list[str]:
    """The ``pi_kernel`` modules ``tree`` imports inside a function (``TYPE_CHECKING`` blocks left out)."""
    modules = module_names()
    hidden = _type_checking_nodes(tree)
    found: list[str] = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if id(node) in hidden or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = [name for name in _imported(node, module, is_package) if name in modules]
            if names:
                found.append(max(names, key=len))  # ``from pi_kernel import widgets``: pi_kernel.widgets
    return found


def unexplained_lazy_imports(docstring: str, imported: list[str]) -> list[str]:
    """The lazily imported modules a module docstring does not account for (see the test below)."""
    if not imported:
        return []
    docstring = " ".join(docstring.split())  # the phrase may be cut by a line break
    if LAZY_PHRASE not in docstring.lower():
        return imported
    missing = []
    for name in imported:
        parts = name.split(".")
        prefixes = {".".join(parts[:end]) for end in range(2, len(parts) + 1)}
        if not any(prefix in docstring for prefix in prefixes):
            missing.append(name)
    return missing


def test_the_lazy_import_rule_reads_the_docstring() -> None:
    imported = ["pi_kernel.tools.approval", "pi_kernel.agent.types"]
    assert unexplained_lazy_imports("Nothing said.", imported) == imported
    assert unexplained_lazy_imports("``pi_kernel.tools`` is imported lazily.", imported) == ["pi_kernel.agent.types"]
    said = "``pi_kernel.tools`` and ``pi_kernel.agent`` are imported lazily: they are slow."
    assert unexplained_lazy_imports(said, imported) == []
    assert unexplained_lazy_imports(said.replace("imported lazily", "imported\n    lazily"), imported) == []
    assert unexplained_lazy_imports("", []) == []
    tree = ast.parse("def f():\n    from pi_kernel import widgets\n    import json\n")
    assert function_level_imports(tree, "pi_kernel.kernel.x", False) == ["pi_kernel.widgets"]


def test_imports_inside_functions_are_explained() -> None:
    """Imports belong at the top of a module. A module that imports a ``pi_kernel`` module inside a function
    (to keep kernel start fast, or because an optional dependency may be missing) says so in its module
    docstring: the words "imported lazily" and, for each such import, the module's dotted name or that of
    a package holding it (``pi_kernel.tools`` covers ``pi_kernel.tools.approval``)."""
    problems = []
    for module, path in sorted(module_names().items()):
        tree = ast.parse(path.read_text())
        imported = function_level_imports(tree, module, path.name == "__init__.py")
        missing = unexplained_lazy_imports(ast.get_docstring(tree) or "", imported)
        if missing:
            problems.append(f"{module}: {', '.join(sorted(set(missing)))}")
    assert problems == [], "imports inside functions the module docstring does not explain: " + "; ".join(problems)
