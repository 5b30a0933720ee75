"""The GGUF dtype spelling ("GGUF_" + ggml type name) has one owner, formats/gguf.py: no other module writes
the prefix as a string literal, so a reader and a checker can never spell it two ways."""

from __future__ import annotations

import ast
from pathlib import Path

import archprobe
from archprobe.formats.gguf import GGUF_PREFIX, ggml_type, gguf_dtype, is_gguf_dtype

OWNER = Path(archprobe.__file__).parent / "formats" / "gguf.py"


def _literal_prefixes(path: Path) -> list[int]:
    """Lines where a string literal (or an f-string's literal part) starts with the GGUF dtype prefix."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("GGUF_"):
            lines.append(node.lineno)
    return lines


def test_only_formats_gguf_spells_the_prefix():
    found = {str(p.relative_to(OWNER.parents[1])): lines for p in sorted(OWNER.parents[1].rglob("*.py"))
             if p != OWNER and "eval/builtin" not in p.as_posix() and (lines := _literal_prefixes(p))}
    assert not found, f"spell GGUF dtypes with formats/gguf.py's helpers: {found}"


def test_the_helpers_round_trip():
    assert gguf_dtype("Q4_K") == GGUF_PREFIX + "Q4_K" == "GGUF_Q4_K"
    assert is_gguf_dtype("GGUF_F16") and not is_gguf_dtype("F16") and not is_gguf_dtype("BF16")
    assert ggml_type("GGUF_Q8_0") == "Q8_0" and ggml_type("Q8_0") == "Q8_0"
