"""Hub sources for validate: download config.json and only the shards that hold the requested
layers (plus the model-level tensors), into a local folder that validate then reads as usual.

Every byte comes through formats/http.py: each download is capped at the size the listing gives
(a file whose size the listing does not give is refused), streamed to a temporary file and renamed
only when complete, within the command's deadline (ARCHPROBE_DEADLINE_S). File names come from the
index and must be plain names in the repo's top folder."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from archprobe.errors import SourceError

LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
INDEX = "model.safetensors.index.json"


def cache_root() -> Path:
    from archprobe.demo import cache_dir

    return cache_dir() / "validate"


def fetch_layers(source: str, n_layers_needed, progress=None) -> tuple[str, dict]:
    """(local folder, what was fetched). `n_layers_needed(config)` says how many leading layers run."""
    from archprobe.formats.checkpoint import parse_config_bytes, parse_index_bytes, shard_names_from_index
    from archprobe.formats.hub import HubReader, list_files
    from archprobe.formats.limits import Deadline, cap
    from archprobe.validate.mapping import VISION

    repo_id, _, revision = source.partition("@")
    revision = revision or "main"
    deadline = Deadline(what="downloading")
    files = list_files(repo_id, revision, deadline)
    if "config.json" not in files:
        raise SourceError(f"{source}: no config.json in the repo")
    reader = HubReader(repo_id, revision, deadline)
    config = parse_config_bytes(reader.get("config.json", limit=cap("MAX_CONFIG_BYTES")), f"{repo_id}/config.json")
    n_run = n_layers_needed(config)
    folder = cache_root() / (repo_id.replace("/", "--") + "@" + re.sub(r"[^\w.-]", "_", revision))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if INDEX in files:
        index = parse_index_bytes(reader.get(INDEX, limit=cap("MAX_INDEX_BYTES")), f"{repo_id}/{INDEX}")
        shard_names_from_index(index, f"{repo_id}/{INDEX}")   # refuses paths that are not plain names
        weight_map = index["weight_map"]
    elif "model.safetensors" in files:
        weight_map = None
    else:
        raise SourceError(f"{source}: no safetensors weights (model.safetensors or {INDEX})")
    if weight_map is None:
        needed = ["model.safetensors"]
        kept = None
    else:
        needed_set = set()
        for name, shard in weight_map.items():
            if name.startswith(VISION):
                continue
            m = LAYER.search(name)
            if m is None or int(m.group(1)) < n_run:
                needed_set.add(shard)
        needed = sorted(needed_set)
        kept = {k: v for k, v in weight_map.items() if v in needed_set}
    extras = [f for f in ("tokenizer.json",) if f in files]   # for --prompt TEXT; read as data only
    for n, shard in enumerate(needed + extras):
        if progress:
            progress(n, len(needed) + len(extras))
        download(reader, shard, files.get(shard), folder / shard)
    if kept is not None:  # the folder's index lists only what is here, so validate reads nothing else
        (folder / INDEX).write_text(json.dumps({"metadata": {"archprobe_partial": True}, "weight_map": kept}))
    all_shards = sorted(set(weight_map.values())) if weight_map else ["model.safetensors"]
    return str(folder), {"repo": repo_id, "revision": revision, "layers": n_run, "shards_downloaded": needed,
                         "shards_total": len(all_shards),
                         "bytes_downloaded": sum(files.get(s) or 0 for s in needed),
                         "bytes_total": sum(files.get(s) or 0 for s in all_shards)}


def download(reader, name: str, size: int | None, dest: Path) -> None:
    """`name` into `dest`, exactly `size` bytes (the listing's), through a temporary file; kept when the
    file already there has that size."""
    from archprobe.formats.hub import repo_path_problem

    if repo_path_problem(name) or "/" in name:
        raise SourceError(f"{reader.repo_id}: file {name[:80]!r} is not a plain file name in the repo; refused")
    if size is None:
        raise SourceError(f"{reader.repo_id}/{name}: the listing gives no size; refused to download without a cap")
    if dest.is_file() and not dest.is_symlink() and dest.stat().st_size == size:
        return
    part = dest.with_name(dest.name + ".part")
    try:
        with open(part, "wb") as f:
            reader.get(name, limit=size, sink=f.write)
            written = f.tell()
        if written != size:
            raise SourceError(f"{reader.repo_id}/{name}: {written:,} bytes arrived, the listing says {size:,}")
        os.replace(part, dest)
    except OSError as exc:
        raise SourceError(f"{dest}: cannot write the download ({exc.strerror or exc})") from None
    finally:
        if part.exists():
            part.unlink()
