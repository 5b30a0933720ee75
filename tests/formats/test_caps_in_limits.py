"""Every cap lives in formats/limits.py: a module-level MAX_* (or *_BYTES, *_CHARS, *_CAP, *_LIMIT) number
defined anywhere else fails here, and a cap the docs quote as `N MB (`formats/limits.py` NAME)` is that value."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import archprobe
from archprobe.formats import limits

SRC = Path(archprobe.__file__).parent
DOCS = [SRC.parents[1] / "README.md", *sorted((SRC.parents[1] / "docs").glob("*.md"))]
CAP_NAME = re.compile(r"^_?(MAX_[A-Z0-9_]*|[A-Z0-9_]*_(BYTES|CHARS|LIMIT|CAP))$")
# sizes chosen for speed or memory locality that bound no input (a smaller or larger one changes no answer)
TUNING = {"SEGMENT_BYTES", "SESSION_BYTES", "WHOLE_PARSE_BYTES", "STREAM_MIN_BYTES", "MAX_BLOCK",
          "MAX_HEADER_FOR_PROCESSES", "MAX_KEY_DIM"}
UNITS = {"KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}


def _is_number(node: ast.expr) -> bool:
    return all(isinstance(n, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.expr_context))
               for n in ast.walk(node)) and all(isinstance(n.value, (int, float)) for n in ast.walk(node)
                                               if isinstance(n, ast.Constant))


def caps_defined_in(text: str) -> list[str]:
    """Module-level assignments of a cap-named number."""
    found = []
    for node in ast.parse(text).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else (
            node.target if isinstance(node, ast.AnnAssign) and node.value is not None else None)
        if isinstance(target, ast.Name) and CAP_NAME.match(target.id) and target.id not in TUNING \
                and _is_number(node.value):
            found.append(f"{target.id} (line {node.lineno})")
    return found


def test_the_finder_sees_a_cap():
    assert caps_defined_in("MAX_THING = 8 * 1024\nNAME = 3\nLIMIT_BYTES: int = 1 << 20\nX_BYTES = f(1)\n") == [
        "MAX_THING (line 1)", "LIMIT_BYTES (line 3)"]


def test_no_cap_is_defined_outside_limits():
    bad = [f"{p.relative_to(SRC)}: {c}" for p in sorted(SRC.rglob("*.py")) if p != Path(limits.__file__)
           for c in caps_defined_in(p.read_text())]
    assert bad == []


def test_the_docs_quote_the_caps_the_code_has():
    quoted = [(doc.name, int(n), unit, name) for doc in DOCS
              for n, unit, name in re.findall(r"(\d+) (KB|MB|GB) \(`formats/limits\.py` (\w+)\)", doc.read_text())]
    assert quoted, "no doc quotes a cap"
    for doc, n, unit, name in quoted:
        value = getattr(limits, name, None)
        if value is None:
            value = limits.cap(name)
        assert value == n * UNITS[unit], f"{doc} quotes {name} as {n} {unit}; the code has {value:,} bytes"
