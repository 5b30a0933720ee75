"""Where a checkpoint comes from: a local folder, a single file, or a hub repo (`org/name[@rev]`).

Every source yields the same `RawCheckpoint`: config.json (parsed, never executed), the folded tensor
infos of every shard, per-file byte counts. Paths in `model.safetensors.index.json` are hostile:
a shard must be a plain file name inside the checkpoint folder.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from archprobe.errors import CheckpointError, SourceError
from archprobe.formats.safetensors import Header

MAX_CONFIG_BYTES = 16 * 1024 * 1024
MAX_INDEX_BYTES = 512 * 1024 * 1024   # K3's index (497k weight_map entries) is ~40 MB
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
    """Resolve `source` (path or hub id) and read config + headers."""
    if os.path.lexists(source):
        return _open_local(source, progress)
    if HUB_SOURCE.match(source) and not source.startswith((".", "/", "~")):
        from archprobe.formats.hub import open_hub

        return open_hub(source, progress)
    raise SourceError(f"{source}: no such file or folder, and not a hub repo id (org/name[@revision][:GGUF_TAG])")


def parse_config_bytes(raw: bytes, where: str) -> dict:
    if len(raw) > MAX_CONFIG_BYTES:
        raise CheckpointError(where, f"config.json is {len(raw):,} bytes, over the {MAX_CONFIG_BYTES:,} cap")
    try:
        cfg = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(where, f"config.json is not valid JSON ({exc})") from None
    if not isinstance(cfg, dict):
        raise CheckpointError(where, "config.json is not a JSON object")
    return cfg


def _read_small(path: str, cap: int = MAX_CONFIG_BYTES) -> bytes:
    try:
        with open(path, "rb") as f:
            raw = f.read(cap + 1)
            if len(raw) > cap:
                raise CheckpointError(path, f"over the {cap:,}-byte cap for this file")
            return raw
    except OSError as exc:
        raise CheckpointError(path, f"cannot read: {exc.strerror or exc}") from None


def parse_index_bytes(raw: bytes, where: str) -> dict:
    """model.safetensors.index.json, parsed (orjson when available: the K3 index is ~40 MB)."""
    from archprobe.formats.safetensors import _json_loads, _JSONError

    try:
        index = _json_loads(raw)
    except (_JSONError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(where, f"not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(index, dict):
        raise CheckpointError(where, "not a JSON object")
    return index


def shard_names_from_index(index: dict, where: str) -> list[str]:
    """The shard file names of an index's weight_map, refusing anything that is not a plain name."""
    wm = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(wm, dict) or not wm:
        raise CheckpointError(where, "index has no weight_map object")
    names = []
    for f in dict.fromkeys(wm.values()):
        if (not isinstance(f, str) or not f or "/" in f or "\\" in f or f in (".", "..") or "\0" in f
                or not f.endswith(".safetensors")):
            raise CheckpointError(where, f"weight_map names shard {f!r}: not a .safetensors file in this folder")
        names.append(f)
    return names


def _check_inside(folder: str, path: str) -> str:
    """Resolve symlinks (a loop is an error) and make sure the file stays inside `folder`."""
    try:
        real = os.path.realpath(path, strict=True)
    except OSError as exc:
        problem = "symlink loop" if "loop" in str(exc).lower() or getattr(exc, "errno", 0) == 40 else (
            exc.strerror or str(exc))
        raise CheckpointError(path, f"cannot open: {problem}") from None
    root = os.path.realpath(folder)
    if os.path.commonpath([root, real]) != root:
        raise CheckpointError(path, f"resolves to {real}, outside the checkpoint folder")
    if not os.path.isfile(real):
        raise CheckpointError(path, "not a regular file")
    return path


def _open_local(source: str, progress: Progress | None) -> RawCheckpoint:
    from archprobe.formats.parallel import read_headers

    warnings: list[str] = []
    if os.path.isdir(source):
        folder, single = source, None
    else:
        _check_inside(os.path.dirname(os.path.abspath(source)) or ".", source)
        folder, single = os.path.dirname(os.path.abspath(source)), source
    cfg_path = os.path.join(folder, "config.json")
    config = None
    if os.path.isfile(cfg_path):
        config = parse_config_bytes(_read_small(_check_inside(folder, cfg_path)), cfg_path)
    if single is not None and single.endswith(".gguf"):
        return _open_gguf(_split_siblings(single), source, config, warnings)
    if single is not None:
        if not single.endswith(".safetensors"):
            raise _unsupported_file(single)
        paths = [single]
    else:
        entries = sorted(os.listdir(folder))
        index_path = os.path.join(folder, "model.safetensors.index.json")
        if os.path.isfile(index_path):
            index = parse_index_bytes(_read_small(_check_inside(folder, index_path), MAX_INDEX_BYTES), index_path)
            paths = [os.path.join(folder, n) for n in shard_names_from_index(index, index_path)]
            extra = {e for e in entries if e.endswith(".safetensors")} - {os.path.basename(p) for p in paths}
            if extra:
                warnings.append(f"{len(extra)} .safetensors file(s) not named by the index were ignored: "
                                + ", ".join(sorted(extra)[:5]))
        else:
            paths = [os.path.join(folder, e) for e in entries if e.endswith(".safetensors")]
        if not paths:
            ggufs = [e for e in entries if e.endswith(".gguf")]
            if ggufs:
                from archprobe.formats.gguf import choose_model

                sizes = {e: os.path.getsize(os.path.join(folder, e)) for e in ggufs}
                chosen, notes = choose_model(ggufs, sizes, None, source)
                warnings += notes
                return _open_gguf([os.path.join(folder, e) for e in chosen], source, config, warnings)
            pickles = [e for e in entries if e.endswith(PICKLE_SUFFIXES)]
            if pickles:
                raise _unsupported_file(os.path.join(folder, pickles[0]))
            raise SourceError(f"{source}: no .safetensors or .gguf files here",
                              hint="point archprobe at the folder that holds the model's shards")
    for p in paths:
        if not os.path.lexists(p):
            raise CheckpointError(p, "shard named by the index is missing")
        _check_inside(folder, p)
    done = [0]

    def tick(_h):
        done[0] += 1
        if progress:
            progress(done[0], len(paths))

    headers = read_headers(paths, on_done=tick)
    return RawCheckpoint("local", os.path.abspath(source), None, config, headers, None, warnings)


def _split_siblings(path: str) -> list[str]:
    """All shards of a split GGUF (`name-00002-of-00003.gguf` -> shards 1..3), else the file alone."""
    from archprobe.formats.gguf import split_shard_names

    shards = split_shard_names(path)
    for shard in shards:
        if not os.path.isfile(shard):
            raise CheckpointError(shard, f"shard of a {len(shards)}-file split GGUF is missing")
    return shards


def _open_gguf(paths: list[str], source: str, config: dict | None, warnings: list[str]) -> RawCheckpoint:
    from archprobe.formats.gguf import read_gguf

    headers, meta, gcfg = [], {}, None
    for p in paths:
        h, m, c = read_gguf(p)
        headers.append(h)
        meta = meta or m
        gcfg = gcfg or c
    return RawCheckpoint("gguf", os.path.abspath(source), None, config or gcfg, headers, meta, warnings)


def _unsupported_file(path: str) -> SourceError:
    if path.endswith(PICKLE_SUFFIXES):
        return SourceError(f"{path}: pickle-based weights are never unpickled by archprobe inspect",
                           hint="convert to safetensors (e.g. with transformers' save_pretrained) and retry")
    return SourceError(f"{path}: not a .safetensors or .gguf file")
