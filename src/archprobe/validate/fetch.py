"""Hub sources for validate: download config.json and only the shards that hold the requested
layers (plus the model-level tensors), into a local folder that validate then reads as usual.

Every byte comes through formats/http.py: each download is capped at the size the listing gives
(a file whose size the listing does not give is refused), streamed to a temporary file and renamed
only when complete, within the command's deadline (ARCHPROBE_DEADLINE_S). File names come from the
index and must be plain names in the repo's top folder.

A GGUF repo (`org/name[@rev]:TAG`, or a repo with GGUF files and no safetensors weights) downloads the one
GGUF model TAG names (formats/gguf.choose_model: a part of its file name, or the file name itself), every
split part of it, each checked against the sha256 the hub's listing gives (a missing or malformed one is
refused), into the cache; validate then reads the local file as usual."""

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


def is_gguf_repo(source: str, files: dict) -> bool:
    """A `:TAG` source, or a repo whose weights are GGUF files only."""
    has_safetensors = any(f.endswith(".safetensors") and "/" not in f for f in files)
    return ":" in source or (not has_safetensors and any(f.endswith(".gguf") for f in files))


def fetch_gguf(source: str, progress=None, hashes: dict | None = None) -> tuple[str, dict]:
    """(the local path of the chosen GGUF model's first file, what was fetched), every file sha256-checked.
    `hashes`: the repo's listing (formats/hub.list_hashes) when the caller has read it already."""
    from archprobe.formats.gguf import choose_model
    from archprobe.formats.hub import HubReader, list_hashes
    from archprobe.formats.limits import Deadline

    rest, _, tag = source.partition(":")
    repo_id, _, revision = rest.partition("@")
    revision = revision or "main"
    deadline = Deadline(what="downloading")
    hashes = hashes if hashes is not None else list_hashes(repo_id, revision, deadline)
    where = f"{repo_id}@{revision}"
    ggufs = [f for f in hashes if f.endswith(".gguf")]
    if not ggufs:
        raise SourceError(f"{where}: no .gguf files", hint="drop ':TAG' to validate safetensors weights")
    chosen, warnings = choose_model(ggufs, {f: h.size for f, h in hashes.items()}, tag or None, where)
    reader = HubReader(repo_id, revision, deadline)
    folder = cache_root() / (repo_id.replace("/", "--") + "@" + re.sub(r"[^\w.-]", "_", revision))
    folder.mkdir(parents=True, exist_ok=True)
    for n, name in enumerate(chosen):
        if progress:
            progress(n, len(chosen))
        h = hashes[name]
        if h.sha256 is None:
            raise SourceError(f"{repo_id}/{name}: {h.problem or 'the hub gives no sha256 for it'}; "
                              "refused (the download could not be verified)")
        download(reader, name, h.size, folder / name, sha256=h.sha256, nested=True)
    return str(folder / chosen[0]), {"repo": repo_id, "revision": revision, "gguf_files": chosen,
                                     "sha256": {f: hashes[f].sha256 for f in chosen},
                                     "bytes_downloaded": sum(hashes[f].size or 0 for f in chosen),
                                     "warnings": warnings}


def _sha256_of(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def download(reader, name: str, size: int | None, dest: Path, sha256: str | None = None,
             nested: bool = False) -> None:
    """`name` into `dest`, exactly `size` bytes (the listing's) and, given `sha256`, exactly those bytes,
    through a temporary file; kept when the file already there has that size (and that sha256). `nested`
    allows a path in a subfolder of the repo (GGUF quantizations often live in one), which stays one below
    the cache folder (repo_path_problem refuses '..', absolute and odd paths)."""
    import hashlib

    from archprobe.formats.hub import repo_path_problem

    if repo_path_problem(name) or ("/" in name and not nested):
        raise SourceError(f"{reader.repo_id}: file {name[:80]!r} is not a plain file name in the repo; refused")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if size is None:
        raise SourceError(f"{reader.repo_id}/{name}: the listing gives no size; refused to download without a cap")
    if dest.is_file() and not dest.is_symlink() and dest.stat().st_size == size and (
            sha256 is None or _sha256_of(dest) == sha256):
        return
    part = dest.with_name(dest.name + ".part")
    digest = hashlib.sha256()
    try:
        with open(part, "wb") as f:
            def sink(chunk: bytes) -> None:
                digest.update(chunk)
                f.write(chunk)

            reader.get(name, limit=size, sink=sink)
            written = f.tell()
        if written != size:
            raise SourceError(f"{reader.repo_id}/{name}: {written:,} bytes arrived, the listing says {size:,}")
        if sha256 is not None and digest.hexdigest() != sha256:
            raise SourceError(f"{reader.repo_id}/{name}: the download's sha256 {digest.hexdigest()[:16]}... is not "
                              f"the hub's {sha256[:16]}...; discarded", hint="try again; if it persists, the "
                              "server is not serving the file the hub lists")
        os.replace(part, dest)
    except OSError as exc:
        raise SourceError(f"{dest}: cannot write the download ({exc.strerror or exc})") from None
    finally:
        if part.exists():
            part.unlink()
