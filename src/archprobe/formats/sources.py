"""Where a checkpoint comes from: a local folder, a single file, or a hub repo (`org/name[@rev]`).

Every source yields the same `RawCheckpoint`: config.json (parsed, never executed), the folded tensor
infos of every shard, per-file byte counts. Paths in `model.safetensors.index.json` are hostile:
a shard must be a plain file name inside the checkpoint folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from archprobe.errors import CheckpointError, SourceError
from archprobe.formats.limits import _DEFAULTS, cap
from archprobe.formats.safetensors import Header

MAX_CONFIG_BYTES = int(_DEFAULTS["MAX_CONFIG_BYTES"])   # formats/limits.py: every cap, env overrides
MAX_INDEX_BYTES = int(_DEFAULTS["MAX_INDEX_BYTES"])     # K3's index (497k weight_map entries) is ~40 MB
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}(@[\w./-]{1,128})?$")
HUB_SOURCE = re.compile(HUB_ID.pattern[:-1] + r"(:[\w.+-]{1,96})?$")   # inspect: `:TAG` picks a GGUF model
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


def open_source(source: str, progress: Progress | None = None) -> RawCheckpoint:
    """Resolve `source` (path or hub id) and read config + headers, within the command's deadline
    (formats/limits.reading_deadline: local reads too)."""
    from archprobe.formats.limits import reading_deadline

    with reading_deadline(source):
        return _open_source(source, progress)


def _open_source(source: str, progress: Progress | None) -> RawCheckpoint:
    if os.path.lexists(source):
        return _open_local(source, progress)
    if HUB_SOURCE.match(source) and not source.startswith((".", "/", "~")):
        from archprobe.formats.hub import open_hub

        return open_hub(source, progress)
    raise SourceError(f"{source}: no such file or folder, and not a hub repo id (org/name[@revision][:GGUF_TAG])")


def parse_config_bytes(raw: bytes, where: str) -> dict:
    """config.json, parsed strictly (caps, depth, no duplicate keys or NaN: formats/jsontext.py)."""
    from archprobe.formats.jsontext import load_strict

    return load_strict(raw, where, "config.json", cap("MAX_CONFIG_BYTES"))


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
        raise CheckpointError(where, f"weight_map names shard {_short(odd)}: not a file name")
    names = []
    for f in dict.fromkeys(wm.values()):
        problem = plain_name_problem(f)
        if problem:
            raise CheckpointError(where, f"weight_map names shard {_short(f)}: {problem}")
        names.append(f)
    if len(names) > cap("MAX_SHARDS"):
        raise CheckpointError(where, f"index names {len(names):,} shards, over the {cap('MAX_SHARDS'):,} cap")
    return names


NUMBERED = re.compile(r"^(?P<base>.+)-(?P<no>\d{1,12})-of-(?P<count>\d{1,12})\.safetensors$")


def numbered_shards(files) -> list[str] | None:
    """The complete `base-k-of-n.safetensors` set among `files` (top folder only), when there is exactly
    one: then the index (K3's is 58 MB) need not be read to know the shards. Any digit width counts, as
    published: `-00001-of-00096`, `-00001-of-000096` (K3), `-1-of-61` (Kimi K2). Complete means every
    number 1..n exactly once (`-01-` beside `-1-` is not a set); shards come back in number order."""
    sets: dict[tuple[str, str], dict[int, list[str]]] = {}
    for f in files:
        m = NUMBERED.match(f) if isinstance(f, str) and "/" not in f else None
        if m:
            sets.setdefault((m["base"], m["count"]), {}).setdefault(int(m["no"]), []).append(f)
    if len(sets) != 1:
        return None
    (_, count), by_number = next(iter(sets.items()))
    n = int(count)
    if n < 1 or n > cap("MAX_SHARDS") or len(by_number) != n:
        return None
    if any(len(names) != 1 for names in by_number.values()) or set(by_number) != set(range(1, n + 1)):
        return None
    return [by_number[i][0] for i in range(1, n + 1)]


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_inside(folder: str, path: str) -> str:
    """`path`, a regular file that resolves inside `folder` (formats/localfiles.py)."""
    from archprobe.formats.localfiles import regular_file_inside

    return regular_file_inside(folder, path)


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
                    raise CheckpointError(self.where, f"tensor {_short(t.name)} is in two shards ({_short(first)} "
                                                      f"and {_short(h.file)})")
                continue
            acc = self.experts.setdefault(t.name, [0, -1])
            acc[0] += t.count
            acc[1] = max(acc[1], t.top)
            if acc[0] > acc[1] + 1:
                raise CheckpointError(self.where, f"tensor {_short(t.name)}: {acc[0]:,} expert tensors for indices "
                                                  f"0..{acc[1]}; some names repeat across shards")


def check_distinct(headers: list[Header], where: str) -> None:
    """`Distinct` over headers already read."""
    distinct = Distinct(where)
    for h in headers:
        distinct.add(h)


class _Totals:
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


def _open_local(source: str, progress: Progress | None) -> RawCheckpoint:
    from archprobe.formats.localfiles import read_capped
    from archprobe.formats.parallel import read_headers

    warnings: list[str] = []
    if os.path.isdir(source):
        folder, single = source, None
    else:
        folder, single = os.path.dirname(os.path.abspath(source)), source
        _check_inside(folder, source)
    cfg_path = os.path.join(folder, "config.json")
    config = None
    if os.path.lexists(cfg_path):
        config = parse_config_bytes(read_capped(folder, cfg_path, cap("MAX_CONFIG_BYTES"), "config.json"), cfg_path)
    if single is not None and single.endswith(".gguf"):
        return _open_gguf(folder, _split_siblings(single), source, config, warnings)
    if single is not None:
        if not single.endswith(".safetensors"):
            raise _unsupported_file(single)
        paths = [single]
    else:
        try:
            entries = sorted(os.listdir(folder))
        except OSError as exc:
            raise SourceError(f"{source}: cannot list the folder ({exc.strerror or exc})") from None
        index_path = os.path.join(folder, "model.safetensors.index.json")
        numbered = numbered_shards(entries)
        if numbered is not None:   # a complete numbered set: the shards are known without the index
            paths = [os.path.join(folder, n) for n in numbered]
            extra = {e for e in entries if e.endswith(".safetensors")} - set(numbered)
            if extra:
                warnings.append(f"{len(extra)} .safetensors file(s) outside the numbered shard set were ignored: "
                                + ", ".join(_short(e) for e in sorted(extra)[:5]))
        elif os.path.lexists(index_path):
            raw_index = read_capped(folder, index_path, cap("MAX_INDEX_BYTES"), "the index")
            index = parse_index_bytes(raw_index, index_path)
            del raw_index
            paths = [os.path.join(folder, n) for n in shard_names_from_index(index, index_path)]
            del index
            extra = {e for e in entries if e.endswith(".safetensors")} - {os.path.basename(p) for p in paths}
            if extra:
                warnings.append(f"{len(extra)} .safetensors file(s) not named by the index were ignored: "
                                + ", ".join(_short(e) for e in sorted(extra)[:5]))
        else:
            paths = [os.path.join(folder, e) for e in entries if e.endswith(".safetensors")]
        if len(paths) > cap("MAX_SHARDS"):
            raise CheckpointError(source, f"{len(paths):,} shards, over the {cap('MAX_SHARDS'):,} cap")
        if not paths:
            ggufs = [e for e in entries if e.endswith(".gguf")]
            if ggufs:
                from archprobe.formats.gguf import choose_model

                sizes = {e: _size(os.path.join(folder, e)) for e in ggufs}
                chosen, notes = choose_model(ggufs, sizes, None, source)
                warnings += notes
                return _open_gguf(folder, [os.path.join(folder, e) for e in chosen], source, config, warnings)
            pickles = [e for e in entries if e.endswith(PICKLE_SUFFIXES)]
            if pickles:
                raise _unsupported_file(os.path.join(folder, pickles[0]))
            raise SourceError(f"{source}: no .safetensors or .gguf files here",
                              hint="point archprobe at the folder that holds the model's shards")
    for p in paths:
        if not os.path.lexists(p):
            raise CheckpointError(p, "shard named by the index is missing")
        _check_inside(folder, p)
    totals = _Totals(source)
    done = [0]

    def tick(h: Header) -> None:
        totals.add(h)
        done[0] += 1
        if progress:
            progress(done[0], len(paths))

    headers = read_headers(paths, on_done=tick, folder=folder)
    return RawCheckpoint("local", os.path.abspath(source), None, config, headers, None, warnings)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _split_siblings(path: str) -> list[str]:
    """All shards of a split GGUF (`name-00002-of-00003.gguf` -> shards 1..3), else the file alone."""
    from archprobe.formats.gguf import split_shard_names

    shards = split_shard_names(path)
    for shard in shards:
        if not os.path.lexists(shard):
            raise CheckpointError(shard, f"shard of a {len(shards)}-file split GGUF is missing")
    return shards


def _open_gguf(folder: str, paths: list[str], source: str, config: dict | None,
               warnings: list[str]) -> RawCheckpoint:
    from archprobe.formats.gguf import read_gguf

    headers, meta, gcfg = [], {}, None
    for p in paths:
        h, m, c = read_gguf(p, folder)
        headers.append(h)
        meta = meta or m
        gcfg = gcfg or c
    check_distinct(headers, source)
    return RawCheckpoint("gguf", os.path.abspath(source), None, config or gcfg, headers, meta, warnings)


def _unsupported_file(path: str) -> SourceError:
    if path.endswith(PICKLE_SUFFIXES):
        return SourceError(f"{path}: pickle-based weights are never unpickled by archprobe inspect",
                           hint="convert to safetensors (e.g. with transformers' save_pretrained) and retry")
    return SourceError(f"{path}: not a .safetensors or .gguf file")
