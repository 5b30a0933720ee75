"""`--prompt TEXT`: token ids from the checkpoint's tokenizer.json (the `tokenizers` library parses
it as data; a tokenizer that needs custom Python code, e.g. tiktoken-based ones, is refused)."""

from __future__ import annotations

import os

from archprobe.errors import ArchprobeError

TOP_K = 5


def _tokenizer(folder: str):
    """The folder's tokenizer.json parsed as data, or None where there is none or it is unusable."""
    path = os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(path):
        return None
    try:
        from tokenizers import Tokenizer

        return Tokenizer.from_file(path)
    except Exception:
        return None


def top_tokens(folder: str, logits, k: int = TOP_K) -> list[dict]:
    """The k most likely next tokens after the last position of `logits` [.., T, V]: id, decoded text
    (None without a tokenizer) and probability (softmax in float64)."""
    import torch

    probs = torch.softmax(logits.reshape(-1, logits.shape[-1])[-1].double(), -1)
    p, ids = probs.topk(min(k, probs.numel()))
    tok = _tokenizer(folder)
    return [{"id": int(i), "token": tok.decode([int(i)]) if tok else None, "prob": float(q)}
            for q, i in zip(p.tolist(), ids.tolist(), strict=True)]


def decode_text(folder: str, ids: list[int]) -> str | None:
    """The text of `ids`, or None without a usable tokenizer.json."""
    tok = _tokenizer(folder)
    return tok.decode(list(ids)) if tok else None


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
