"""Where a checkpoint comes from: a local folder, a single file, or a hub repo (`org/name[@rev]`).

Every source yields the same `RawCheckpoint`: config.json (parsed, never executed), the folded tensor
infos of every shard, per-file byte counts. Paths in `model.safetensors.index.json` are hostile:
a shard must be a plain file name inside the checkpoint folder.
"""

from __future__ import annotations

import os
import re

from archprobe.errors import CheckpointError, SourceError
from archprobe.formats.checkpoint import (
    PICKLE_SUFFIXES,
    HeaderTotals,
    Progress,
    RawCheckpoint,
    check_distinct,
    numbered_shards,
    parse_config_bytes,
    parse_index_bytes,
    shard_names_from_index,
)
from archprobe.formats.limits import cap
from archprobe.formats.safetensors import Header, short_repr

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}(@[\w./-]{1,128})?$")
HUB_SOURCE = re.compile(HUB_ID.pattern[:-1] + r"(:[\w.+-]{1,96})?$")   # inspect: `:TAG` picks a GGUF model


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


def _check_inside(folder: str, path: str) -> str:
    """`path`, a regular file that resolves inside `folder` (formats/localfiles.py)."""
    from archprobe.formats.localfiles import regular_file_inside

    return regular_file_inside(folder, path)


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
                                + ", ".join(short_repr(e) for e in sorted(extra)[:5]))
        elif os.path.lexists(index_path):
            raw_index = read_capped(folder, index_path, cap("MAX_INDEX_BYTES"), "the index")
            index = parse_index_bytes(raw_index, index_path)
            del raw_index
            paths = [os.path.join(folder, n) for n in shard_names_from_index(index, index_path)]
            del index
            extra = {e for e in entries if e.endswith(".safetensors")} - {os.path.basename(p) for p in paths}
            if extra:
                warnings.append(f"{len(extra)} .safetensors file(s) not named by the index were ignored: "
                                + ", ".join(short_repr(e) for e in sorted(extra)[:5]))
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
    totals = HeaderTotals(source)
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
