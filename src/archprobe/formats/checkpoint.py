"""What a checkpoint's files say, and the rules every source (local folder, single file, hub repo) holds
them to: the `RawCheckpoint` a source yields, config.json and index parsing within their caps, shard names
that must be plain file names, tensor names distinct across shards, running header totals.

Shared by formats/sources.py (local files, and the dispatch) and formats/hub.py (HTTP), so neither imports
the other's internals."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from archprobe.errors import CheckpointError
from archprobe.formats.limits import cap
from archprobe.formats.safetensors import Header, short_repr

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


@dataclass
class RawCheckpoint:
    """What the files say, before any interpretation."""

    kind: str                       # local | hub | gguf
    location: str
    revision: str | None
    config: dict | None
    headers: list[Header]
    gguf_metadata: dict | None = None
    warnings: list[str] = field(default_factory=list)
    bytes_fetched: int | None = None  # remote sources: every byte the server sent


Progress = Callable[[int, int], None]  # (done, total) shards


def parse_config_bytes(raw: bytes, where: str) -> dict:
    """config.json, parsed strictly (caps, depth, no duplicate keys: formats/jsontext.py); Infinity and NaN
    literals are values, as transformers writes them, refused by the readers of sizes (structure/config.py)."""
    from archprobe.formats.jsontext import load_strict

    return load_strict(raw, where, "config.json", cap("MAX_CONFIG_BYTES"), non_finite=True)


def parse_index_bytes(raw: bytes, where: str) -> dict:
    """model.safetensors.index.json, parsed (orjson: the K3 index is ~40 MB), within MAX_INDEX_BYTES."""
    from archprobe.formats.jsontext import load_fast

    return load_fast(raw, where, "the index", cap("MAX_INDEX_BYTES"))


def plain_name_problem(name, suffixes: tuple[str, ...] = (".safetensors",)) -> str | None:
    """Why `name` is not a plain file name inside the checkpoint (None when it is)."""
    if not isinstance(name, str) or not name or len(name) > 255:
        return "not a file name"
    if "/" in name or "\\" in name or "\0" in name or name in (".", "..") or name.startswith("~"):
        return "a path, not a file name in this folder"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return "has control characters"
    if not name.endswith(suffixes):
        return "not a " + "/".join(suffixes) + " file"
    return None


def shard_names_from_index(index: dict, where: str) -> list[str]:
    """The shard file names of an index's weight_map, refusing anything that is not a plain name."""
    wm = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(wm, dict) or not wm:
        raise CheckpointError(where, "index has no weight_map object")
    odd = next((v for v in wm.values() if not isinstance(v, str)), None)
    if odd is not None:     # a list or dict value would not even hash
        raise CheckpointError(where, f"weight_map names shard {short_repr(odd)}: not a file name")
    names = []
    for f in dict.fromkeys(wm.values()):
        problem = plain_name_problem(f)
        if problem:
            raise CheckpointError(where, f"weight_map names shard {short_repr(f)}: {problem}")
        names.append(f)
    if len(names) > cap("MAX_SHARDS"):
        raise CheckpointError(where, f"index names {len(names):,} shards, over the {cap('MAX_SHARDS'):,} cap")
    return names


NUMBERED = re.compile(r"^(?P<base>.+)-(?P<no>\d{1,9})-of-(?P<count>\d{1,9})\.safetensors$")


def numbered_shards(files) -> list[str] | None:
    """The complete `base-k-of-n.safetensors` set among `files` (top folder only), when there is exactly
    one: then the index (K3's is 58 MB) need not be read to know the shards. Digit widths are as published:
    five and five (`-00001-of-00096`), five and six (K3's `-00001-of-000096`), or none (K2's `-1-of-61`);
    the shard numbers share one width, the count keeps its own."""
    sets: dict[tuple[str, str], dict[str, str]] = {}
    for f in files:
        m = NUMBERED.match(f) if "/" not in f else None
        if m:
            sets.setdefault((m["base"], m["count"]), {})[m["no"]] = f
    if len(sets) != 1:
        return None
    (base, count), by_number = next(iter(sets.items()))
    n = int(count)
    if not 1 <= n <= cap("MAX_SHARDS") or len(by_number) != n:
        return None
    for width in sorted({len(no) for no in by_number}):
        expected = [f"{base}-{i:0{width}d}-of-{count}.safetensors" for i in range(1, n + 1)]
        if set(expected) == set(by_number.values()):
            return expected
    return None


class Distinct:
    """Tensor names across shards, checked as each header arrives: a name in two shards is an error at
    the second (100k shards repeating one name stop at the second shard, they are not 100k tensors).

    Folded expert entries carry their largest expert index: more of them than indices 0..top (so far)
    is a repeat, by pigeonhole, whatever arrives later.
    """

    def __init__(self, where: str):
        self.where = where
        self.seen: dict[str, str] = {}
        self.experts: dict[str, list[int]] = {}

    def add(self, h: Header) -> None:
        for t in h.tensors:
            if t.top < 0:
                first = self.seen.setdefault(t.name, h.file)
                if first != h.file:
                    raise CheckpointError(self.where, f"tensor {short_repr(t.name)} is in two shards "
                                                      f"({short_repr(first)} and {short_repr(h.file)})")
                continue
            acc = self.experts.setdefault(t.name, [0, -1])
            acc[0] += t.count
            acc[1] = max(acc[1], t.top)
            if acc[0] > acc[1] + 1:
                raise CheckpointError(self.where, f"tensor {short_repr(t.name)}: {acc[0]:,} expert tensors for "
                                                  f"indices 0..{acc[1]}; some names repeat across shards")


def check_distinct(headers: list[Header], where: str) -> None:
    """`Distinct` over headers already read."""
    distinct = Distinct(where)
    for h in headers:
        distinct.add(h)


class HeaderTotals:
    """Running totals while headers arrive: entries and header bytes against their caps, names distinct."""

    def __init__(self, where: str):
        self.where, self.entries, self.bytes = where, 0, 0
        self.max_entries, self.max_bytes = cap("MAX_TENSOR_ENTRIES"), cap("MAX_TOTAL_HEADER_BYTES")
        self.distinct = Distinct(where)

    def add(self, h: Header) -> None:
        self.distinct.add(h)
        self.entries += len(h.tensors)
        self.bytes += h.header_bytes
        if self.entries > self.max_entries:
            raise CheckpointError(self.where, f"over {self.max_entries:,} tensor entries in all shards; refused "
                                              "(ARCHPROBE_MAX_TENSOR_ENTRIES)")
        if self.bytes > self.max_bytes:
            raise CheckpointError(self.where, f"over {self.max_bytes:,} bytes of headers in all shards; refused "
                                              "(ARCHPROBE_MAX_TOTAL_HEADER_BYTES)")
