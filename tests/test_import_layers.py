"""The house drawn from the imports (read from the source with `ast`, lazy imports included): no package
imports one that imports it back, the reading package (`archprobe.formats`) stands on nothing above it and
needs no torch, the writers are reached only by the demo, and nobody reaches into another package's
private (`_name`) parts.

One planned exception to "no cycle": a mechanism's hooks (functions in `archprobe.kinds.<kind>`) import the
stage they serve inside the hook (its nn module, validate's card readers, structure's binding types), while
that stage reads the registry. The registry itself (kinds/__init__, spec, formulas) and every kind module at
import time stand on nothing above them; `test_the_registry_loads_no_stage` holds that."""

from __future__ import annotations

import ast
from pathlib import Path

import archprobe

SRC = Path(archprobe.__file__).parent
READER_MAY_IMPORT = ("archprobe.formats", "archprobe.errors")
WRITER_USERS = ("archprobe.writers", "archprobe.demo")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(top_level_only: bool = False) -> dict[str, list[tuple[str, list[str], int]]]:
    """module -> [(imported module, names taken from it, line)], every import statement anywhere in the file
    (`top_level_only`: those that run when the module is imported, not inside a function)."""
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        found = []
        tree = ast.parse(path.read_text(), str(path))
        inside = _inside_functions(tree) if top_level_only else set()
        nodes = [n for n in ast.walk(tree) if id(n) not in inside]
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append((node.module, [a.name for a in node.names], node.lineno))
            elif isinstance(node, ast.Import):
                found += [(a.name, [], node.lineno) for a in node.names]
        out[_module_name(path)] = found
    return out


def _inside_functions(tree: ast.Module) -> set[int]:
    """ids of the nodes within a function body (imports there run when the function is called)."""
    return {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for body in f.body for n in ast.walk(body)}


IMPORTS = _imports()
TOP_LEVEL_IMPORTS = _imports(top_level_only=True)


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

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
    return found


def _graph(key) -> dict[str, set[str]]:
    """Package (or module) -> those it imports; a kind's hooks calling into their stage left out (see above)."""
    graph: dict[str, set[str]] = {}
    for module, found in IMPORTS.items():
        if _within(module, ("archprobe.kinds",)):
            found = TOP_LEVEL_IMPORTS[module]
        for target, _, _ in found:
            if target.startswith("archprobe.") and key(module) != key(target):
                graph.setdefault(key(module), set()).add(key(target))
    return graph


def test_the_scan_sees_the_tree():
    # guards the tests below against scanning nothing
    assert "archprobe.formats.sources" in IMPORTS and "archprobe.writers.synthetic" in IMPORTS
    assert any(t == "archprobe.formats.limits" for t, _, _ in IMPORTS["archprobe.formats.sources"])


def test_cycle_finder_finds_a_known_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_package_imports_one_that_imports_it_back():
    assert _cycles(_graph(_package)) == []


def test_the_registry_loads_no_stage():
    bad = [f"{m}:{line} imports {t}" for m, found in TOP_LEVEL_IMPORTS.items() if _within(m, ("archprobe.kinds",))
           for t, _, line in found if t.startswith("archprobe") and not _within(t, ("archprobe.kinds",
                                                                                       "archprobe.errors"))]
    assert bad == []


def test_no_module_cycle_inside_the_reading_package():
    formats = {m: found for m, found in IMPORTS.items() if _within(m, ("archprobe.formats",))}
    graph: dict[str, set[str]] = {}
    for module, found in formats.items():
        for target, names, _ in found:
            # `from archprobe.formats import x` names the module archprobe.formats.x
            targets = [f"{target}.{n}" for n in names] if target == "archprobe.formats" else [target]
            for t in targets:
                if t in formats and t != module:
                    graph.setdefault(module, set()).add(t)
    assert _cycles(graph) == []


def test_the_reading_package_stands_on_nothing_above_it_and_needs_no_torch():
    bad = [f"{m}:{line} imports {t}" for m, found in IMPORTS.items() if _within(m, ("archprobe.formats",))
           for t, _, line in found
           if (t.startswith("archprobe") and not _within(t, READER_MAY_IMPORT))
           or _within(t, ("torch", "numpy", "transformers", "safetensors"))]
    assert bad == []


def test_writers_are_reached_only_by_the_demo():
    bad = [f"{m}:{line}" for m, found in IMPORTS.items() if not _within(m, WRITER_USERS)
           for t, _, line in found if _within(t, ("archprobe.writers",))]
    assert bad == []


def test_no_private_import_across_packages():
    bad = [f"{m}:{line} takes {n} from {t}" for m, found in IMPORTS.items()
           for t, names, line in found if t.startswith("archprobe.") and _package(t) != _package(m)
           for n in names if n.startswith("_")]
    assert bad == []
