"""Every exception that reaches the command line becomes one line on stderr and an exit status, here.

Why one place: a command that wraps itself can forget to (several did), and a traceback is not an
answer for a user. `ARCHPROBE_DEBUG=1` re-raises, so the traceback is there when we need it.

Exit statuses: 0 success, 1 a validation that ran and failed (`validate`: status fail), 2 every error
(a user mistake, a hostile or broken input, a missing optional extra, and also archprobe's own bugs,
shown as `internal error: ...`), 130 interrupted.
"""

from __future__ import annotations

import os

from archprobe.errors import ArchprobeError
from archprobe.formats.limits import MAX_ERROR_LINE as MAX_LINE
from archprobe.untrusted import visible

DEBUG_ENV = "ARCHPROBE_DEBUG"

# optional dependency (top-level module) -> the extra that installs it (pyproject.toml)
EXTRAS = {"torch": "torch", "matplotlib": "plot", "transformers": "hf", "ray": "ray", "inspect_ai": "inspect",
          "playwright": "browser", "fla": "fla", "httpx": None, "huggingface_hub": None, "safetensors": None,
          "gguf": None, "orjson": None, "prometheus_client": None, "yaml": None, "scipy": None, "numpy": None}


def debug() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """`text` made safe for one terminal line: control characters (newlines, ESC) shown escaped, cut short."""
    line = visible(text)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def describe(exc: BaseException) -> tuple[str, int]:
    """(the line to print, the exit status) for an exception that escaped a command."""
    if isinstance(exc, ArchprobeError):
        hint = f" (hint: {exc.hint})" if exc.hint else ""
        return "error: " + one_line(exc.message + hint), 2
    if isinstance(exc, ImportError):
        module = (getattr(exc, "name", None) or "").split(".")[0]
        if module in EXTRAS:
            extra = EXTRAS[module]
            how = f"pip install 'archprobe[{extra}]'" if extra else f"reinstall archprobe (pip install {module})"
            return f"error: this needs {module}, which is not installed or does not import: {how}", 2
        return "error: " + one_line(f"a module failed to import ({exc})"), 2
    if isinstance(exc, MemoryError):
        return "error: out of memory (the input may be hostile; see the caps in formats/limits.py)", 2
    if isinstance(exc, RecursionError):
        return "internal error: recursion too deep (ARCHPROBE_DEBUG=1 for the traceback)", 2
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return "error: " + one_line(f"{where}{exc.strerror or exc}"), 2
    text = one_line(f"{type(exc).__name__}: {exc}", 300)
    return f"internal error: {text} (ARCHPROBE_DEBUG=1 for the traceback)", 2
