"""Command-line values checked by their type before any work starts, each failure one `OptionError` naming
the option: counts finite, integral, positive and bounded (`--context inf`, `--budget 1e400GB` and
`--chunk -100000` are refused, not turned into an OverflowError or a negative peak), names from their
known set (`--weight-dtype evil`), output paths writable (a missing folder is found before a long run,
not after it).
"""

from __future__ import annotations

import math
import os
import re

from archprobe.errors import ArchprobeError
from archprobe.formats.limits import MAX_OPTION_BYTES as MAX_BYTES
from archprobe.formats.limits import MAX_OPTION_LIST as MAX_LIST
from archprobe.formats.limits import MAX_OPTION_TOKENS as MAX_TOKENS
from archprobe.formats.limits import MAX_TOKEN_ID

_NUMBER = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:e[+-]?[0-9]{1,3})?)\s*([a-z]*)\s*$", re.I)


class OptionError(ArchprobeError):
    """A command-line value that cannot be right."""


def tokens(text: str | int, option: str) -> int:
    """'128k' -> 131072, '1M' -> 1048576, '4096' -> 4096; positive, whole, at most 2^40."""
    m = _NUMBER.match(str(text))
    mult = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}.get(m.group(2).lower()) if m else None
    value = float(m.group(1)) * mult if m and mult else math.nan
    if not math.isfinite(value) or value < 1 or value > MAX_TOKENS or value != int(value):
        raise OptionError(f"{option} {_show(text)}: not a token count (a positive whole number up to 2^40)",
                          hint="e.g. 4096, 32k or 1M")
    return int(value)


def size(text: str, option: str) -> int:
    """'80GB' -> 80e9 bytes, '141GiB' -> 141 * 2^30; positive and finite."""
    from archprobe.memory.plan import parse_bytes

    m = _NUMBER.match(str(text))
    value = float(m.group(1)) if m else math.nan
    if not m or not m.group(2) or not math.isfinite(value) or value <= 0:
        raise OptionError(f"{option} {_show(text)}: a positive size with a unit", hint="e.g. 80GB or 141GiB")
    try:
        n = parse_bytes(str(text).strip())
    except (ArchprobeError, ValueError, OverflowError):
        raise OptionError(f"{option} {_show(text)}: a positive size with a unit", hint="e.g. 80GB or 141GiB") from None
    if not 1 <= n <= MAX_BYTES:
        raise OptionError(f"{option} {_show(text)}: between 1 byte and 1 ZB")
    return n


def budget(text: str) -> tuple[int, int]:
    """'8x141GB' -> (8, 141e9); '80GB' -> (1, 80e9)."""
    t = str(text).strip()
    count = 1
    head, sep, rest = t.lower().partition("x")
    if sep and head.strip().isdigit():
        count = int(head)
        t = rest
        if not 1 <= count <= 1 << 20:
            raise OptionError(f"--budget {text!r}: the device count must be 1 to 2^20", hint="e.g. 8x141GB")
    try:
        return count, size(t, "--budget")
    except OptionError:
        shown = str(text)[:40].encode("ascii", "replace").decode()
        raise OptionError(f"--budget {shown!r}: a positive size with a unit, optionally N x before it",
                          hint="e.g. 80GB, 141GiB or 8x141GB") from None


def finite(value: float | None, option: str, low: float = 0.0, high: float = 1e9) -> float | None:
    """A float option that must be a finite number in [low, high] (nan and inf are not timeouts)."""
    if value is None:
        return None
    if not (math.isfinite(value) and low <= value <= high):
        raise OptionError(f"{option} {_show(value)}: a finite number from {low:g} to {high:g}")
    return value


def token_list(text: str, option: str) -> list[int]:
    items = [t for t in str(text).split(",") if t.strip()]
    if not items or len(items) > MAX_LIST:
        raise OptionError(f"{option} {_show(text)}: 1 to {MAX_LIST} comma-separated token counts")
    return [tokens(t, option) for t in items]


def token_ids(text: str, option: str = "--prompt-ids") -> list[int]:
    """Comma-separated token ids: whole numbers in [0, 2^31)."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items or len(items) > 1 << 20:
        raise OptionError(f"{option} {_show(text)}: comma-separated integers (1 to 2^20 of them)")
    out = []
    for t in items:
        if not t.isdigit() or len(t) > 10 or int(t) > MAX_TOKEN_ID:
            raise OptionError(f"{option} {_show(text)}: comma-separated integers in [0, 2^31)")
        out.append(int(t))
    return out


def choice(value: str | None, known, option: str) -> str | None:
    if value is None:
        return None
    if value.lower() not in {k.lower() for k in known}:
        raise OptionError(f"{option} {_show(value)}: not one of {', '.join(sorted(known))}")
    return value


def dtype(value: str | None, option: str) -> str | None:
    from archprobe.kinds.formulas import DTYPE_BYTES

    if value is None:
        return None
    if value.lower().replace("torch.", "") not in DTYPE_BYTES:
        raise OptionError(f"{option} {_show(value)}: unknown dtype", hint="known: " + ", ".join(sorted(DTYPE_BYTES)))
    return value


def writable_file(path: str | None, option: str) -> str | None:
    """`path` if a file can be written there (its folder exists and is writable, it is not a folder)."""
    if path is None:
        return None
    if not path or "\0" in path:
        raise OptionError(f"{option} {_show(path)}: not a file path")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OptionError(f"{option} {_show(path)}: is a folder, not a file")
    if not os.path.isdir(folder):
        raise OptionError(f"{option} {_show(path)}: the folder {_show(folder)} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise OptionError(f"{option} {_show(path)}: not writable")
    return path


def writable_folder(path: str | None, option: str) -> str | None:
    if path is None:
        return None
    if os.path.exists(path) and not os.path.isdir(path):
        raise OptionError(f"{option} {_show(path)}: exists and is not a folder")
    parent = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise OptionError(f"{option} {_show(path)}: cannot create or write there")
    return path


def _show(value) -> str:
    from archprobe.cli.errors import one_line

    return repr(one_line(str(value), 80))


def user_card(path: str | None):
    """The user's card from `--card`, or None (a bad card is a one-line CardError)."""
    if path is None:
        return None
    from archprobe.structure.card import load_card

    return load_card(path)
