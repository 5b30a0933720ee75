"""observe's default input: a short built-in sample of prose, code and another language, so routing and
depth statistics see more than one kind of text; tokenized with the checkpoint's tokenizer.json, or,
without one, as words and punctuation hashed into the vocabulary (said so in the document): as many
distinct ids as the text has distinct words, where bytes would give a few dozen, and a router fed a few
dozen distinct inputs looks skewed when it is not."""

from __future__ import annotations

import hashlib
import os
import re

from archprobe.errors import ArchprobeError
from archprobe.formats.limits import MAX_OBSERVE_TOKENS as MAX_TOKENS
from archprobe.formats.limits import MAX_PROMPT_FILE_BYTES

SAMPLE = (
    "The river had risen overnight, and by morning the low road to the village was under water. Farmers "
    "moved their animals to the hill, while the children watched the brown current carry branches past "
    "the old stone bridge. Nobody could remember a flood this early in the year, though the oldest woman "
    "in the valley said her mother had told her of one, long ago, when the snow melted all at once.",
    "def merge_sorted(a, b):\n    out, i, j = [], 0, 0\n    while i < len(a) and j < len(b):\n"
    "        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n        else:\n"
    "            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]\n\n"
    "print(merge_sorted([1, 4, 9], [2, 3, 10]))\n",
    "Le lendemain matin, la ville était couverte de neige. Les enfants couraient dans les rues, et les "
    "boulangers ouvraient leurs portes plus tôt que d'habitude. Der Zug nach Berlin hatte zwei Stunden "
    "Verspätung, aber niemand beschwerte sich: draußen war alles still und weiß.",
)


def read_prompt_file(path: str) -> list[str]:
    """Texts from a UTF-8 file, separated by blank lines (size-capped, a regular file only)."""
    import stat

    try:
        st = os.stat(path)
    except OSError as exc:
        raise ArchprobeError(f"--prompt-file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ArchprobeError(f"--prompt-file {path}: not a regular file")
    if st.st_size > MAX_PROMPT_FILE_BYTES:
        raise ArchprobeError(f"--prompt-file {path}: larger than {MAX_PROMPT_FILE_BYTES >> 20} MiB")
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_PROMPT_FILE_BYTES + 1).decode("utf-8")
    except UnicodeDecodeError:
        raise ArchprobeError(f"--prompt-file {path}: not UTF-8 text") from None
    texts = [t.strip() for t in text.replace("\r\n", "\n").split("\n\n") if t.strip()]
    if not texts:
        raise ArchprobeError(f"--prompt-file {path}: no text in it")
    return texts


def encode_texts(folder: str, texts, vocab_size: int) -> tuple[list[int], list[int], str]:
    """(ids of all texts in one sequence, where each text starts, how they were tokenized)."""
    ids: list[int] = []
    starts: list[int] = []
    has_tokenizer = os.path.isfile(os.path.join(folder, "tokenizer.json"))
    for text in texts:
        if has_tokenizer:
            from archprobe.validate.prompt import encode

            piece = encode(folder, text)
        else:
            piece = [_hashed(w, vocab_size) for w in re.findall(r"\w+|[^\w\s]", text)]
        starts.append(len(ids))
        ids += piece
    if len(ids) > MAX_TOKENS:
        raise ArchprobeError(f"the texts make {len(ids)} tokens; observe runs at most {MAX_TOKENS}")
    return ids, starts, "tokenizer.json" if has_tokenizer else "words hashed into the vocabulary"


def _hashed(word: str, vocab_size: int) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little") % vocab_size
