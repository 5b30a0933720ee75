"""`--prompt TEXT`: token ids from the checkpoint's tokenizer.json (the `tokenizers` library parses
it as data; a tokenizer that needs custom Python code, e.g. tiktoken-based ones, is refused)."""

from __future__ import annotations

import os

from archprobe.errors import ArchprobeError


def encode(folder: str, text: str) -> list[int]:
    path = os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(path):
        raise ArchprobeError(f"{folder}: no tokenizer.json, so --prompt cannot be tokenized here",
                             hint="pass --prompt-ids 1,2,3 (custom-code tokenizers are never run)")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ArchprobeError("--prompt needs the tokenizers package", hint="pip install tokenizers") from None
    try:
        ids = Tokenizer.from_file(path).encode(text).ids
    except Exception as exc:
        raise ArchprobeError(f"{path}: not a usable tokenizer.json ({str(exc)[:160]})") from None
    if not ids:
        raise ArchprobeError("--prompt produced no tokens")
    return ids
