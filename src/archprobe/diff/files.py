"""Revision and mirror forensics: which files of two hub sources hold the same bytes, from the hub's own
digests (the tree listing's `lfs.oid` sha256 and git blob `oid`), without downloading a byte of a file.
A local side (`--files-only` with a folder: is my download what the hub holds?) is hashed here, both ways.

A re-upload under the same name, a revision, a mirror under another repo id: the listing of each side says,
per file, the sha256 of its content (LFS files: shards) or its git blob id (small files: config, tokenizer).
Two files are the same bytes when those digests agree; a file whose digest the hub gives malformed, or
that one side stores in LFS and the other in git, is `unverified`, and then nothing is claimed identical.
A file found on the other side under another path with the same sha256 is `moved`, not removed and added;
`weights_identical` holds when both sides carry the same weight bytes, whatever the files are called, and
`model_identical` when, besides, every other file but the docs (README, licence, images) is the same. A
`:TAG` side (a GGUF repo) is only the GGUF model the tag names.
"""

from __future__ import annotations

import os

from archprobe.errors import SourceError

WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth", ".ckpt", ".pkl", ".npz", ".msgpack", ".h5",
                   ".onnx", ".mlx")
LIMIT = 200


def is_hub_source(source: str) -> bool:
    """`org/name[@rev][:TAG]` that is not a local path (as inspect decides)."""
    from archprobe.formats.sources import HUB_SOURCE

    return bool(HUB_SOURCE.match(source)) and not source.startswith((".", "/", "~")) and not os.path.exists(source)


def _parse(source: str) -> tuple[str, str, str]:
    """(repo id, revision, GGUF tag or '') of a hub source."""
    if not is_hub_source(source):
        raise SourceError(f"{source[:120]}: neither a local folder or file nor a hub repo id "
                          "(org/name[@revision][:TAG])")
    rest, _, tag = source.partition(":")
    repo_id, _, revision = rest.partition("@")
    return repo_id, revision or "main", tag


def _side_listing(repo_id: str, revision: str, tag: str, deadline) -> dict:
    """The side's files; with a `:TAG`, only the GGUF model it names (as inspect chooses it)."""
    from archprobe.formats.gguf import choose_model
    from archprobe.formats.hub import list_hashes

    hashes = list_hashes(repo_id, revision, deadline)
    if not tag:
        return hashes
    ggufs = [f for f in hashes if f.endswith(".gguf")]
    if not ggufs:
        raise SourceError(f"{repo_id}@{revision}: no .gguf files for ':{tag}'")
    chosen, _ = choose_model(ggufs, {f: h.size for f, h in hashes.items()}, tag, f"{repo_id}@{revision}")
    return {f: hashes[f] for f in chosen}


def _identity(h) -> tuple[str, str] | None:
    """What names the file's bytes: the content sha256 for LFS (and local) files, the git blob id for the rest."""
    if h.problem:
        return None
    if h.lfs is not False:
        return ("sha256", h.sha256) if h.sha256 else None
    return ("git", h.git_oid) if h.git_oid else None


def _pair(ha, hb) -> tuple | None:
    """The two files' digests of one kind (a local file has both kinds; a hub file the one its storage
    gives), or None when they cannot be compared."""
    if ha.problem or hb.problem:
        return None
    if ha.lfs is None or hb.lfs is None:          # a local side: take the hub side's kind (sha256 if both local)
        kind = "git" if False in (ha.lfs, hb.lfs) else "sha256"
    elif ha.lfs != hb.lfs:
        return None
    else:
        kind = "sha256" if ha.lfs else "git"
    da, db = (h.sha256 if kind == "sha256" else h.git_oid for h in (ha, hb))
    return (da, db) if da and db else None


def _row(path: str, h) -> dict:
    return {"path": path, "size": h.size, "sha256": h.sha256, "git_oid": h.git_oid}


def _is_weight(path: str, h) -> bool:
    return bool(h.lfs) or path.endswith(WEIGHT_SUFFIXES)


DOC_SUFFIXES = (".md", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".pdf")


def _is_doc(path: str) -> bool:
    """A file that describes the model rather than being part of it (a mirror rewrites its README)."""
    base = path.rsplit("/", 1)[-1].lower()
    return base == ".gitattributes" or base.startswith(("readme", "license", "notice")) or base.endswith(DOC_SUFFIXES)


def compare_listings(a: dict, b: dict, limit: int = LIMIT) -> dict:
    """The file section of a diff for two `path -> FileHash` maps (formats/hub.list_hashes)."""
    same, changed, removed, added, moved, unverified = [], [], [], [], [], []
    for path, ha in a.items():
        hb = b.get(path)
        if hb is None:
            continue
        pair = _pair(ha, hb)
        if pair is None:
            why = (ha.problem or hb.problem or ("one side stores it in LFS, the other in git"
                                                if None not in (ha.lfs, hb.lfs) and ha.lfs != hb.lfs
                                                else "the hub gives no digest for it"))
            unverified.append({"path": path, "why": why})
        elif pair[0] == pair[1]:
            same.append(path)
        else:
            changed.append({"path": path, "weights": _is_weight(path, ha) or _is_weight(path, hb),
                            "a": _row(path, ha), "b": _row(path, hb)})
    only_b = {p: h for p, h in b.items() if p not in a}
    by_sha_b: dict[str, list[str]] = {}
    for p, h in only_b.items():
        if _identity(h) and h.sha256:
            by_sha_b.setdefault(h.sha256, []).append(p)
    moved_b = set()
    for path, ha in a.items():
        if path in b:
            continue
        cands = [p for p in by_sha_b.get(ha.sha256, []) if p not in moved_b] if _identity(ha) and ha.sha256 else []
        if cands:
            moved.append({"a": path, "b": cands[0], "sha256": ha.sha256})
            moved_b.add(cands[0])
        else:
            removed.append(_row(path, ha))
    added = [_row(p, h) for p, h in only_b.items() if p not in moved_b]
    weights_a = [_identity(h) for p, h in a.items() if _is_weight(p, h)]
    weights_b = [_identity(h) for p, h in b.items() if _is_weight(p, h)]
    # the same weight bytes on both sides, whatever the files are called (a mirror may rename them)
    weights_same = None not in weights_a + weights_b and sorted(weights_a) == sorted(weights_b)
    rows = {"changed": changed, "removed": removed, "added": added, "moved": moved, "unverified": unverified}
    others = [r["path"] for r in changed + removed + added + unverified] + [r["a"] for r in moved] \
        + [r["b"] for r in moved]
    # the model's files: the weight bytes, and every other file but the docs (config, tokenizer) by path
    model_same = weights_same and not any(not _is_doc(p) and not _is_weight(p, (a.get(p) or b.get(p)))
                                          for p in others if (a.get(p) or b.get(p)) is not None)
    out = {"identical": not (changed or removed or added or moved or unverified),
           "model_identical": model_same and bool(weights_a),
           "weights_identical": weights_same and bool(weights_a),
           "same": len(same), "files_a": len(a), "files_b": len(b),
           "shards_changed": [r["path"] for r in changed if r["weights"]][:limit]}
    for name, r in rows.items():
        out[name] = {"total": len(r), "items": r[:limit], "left_out": max(0, len(r) - limit)}
    return out


def file_diff(a: str, b: str, limit: int = LIMIT) -> dict:
    """Both hub sources' listings compared file by file (two listing requests; no file bytes)."""
    from archprobe.formats.limits import Deadline

    deadline = Deadline()
    listings, labels = [], []
    for source in (a, b):
        if os.path.exists(source) and not is_hub_source(source):
            listings.append(local_hashes(source, deadline))
            labels.append({"path": source})
        else:
            repo, rev, tag = _parse(source)
            listings.append(_side_listing(repo, rev, tag, deadline))
            labels.append({"repo": repo, "revision": rev, "tag": tag or None})
    out = compare_listings(*listings, limit=limit)
    out["a"], out["b"] = labels
    return out


SKIP_DIRS = (".git", ".cache", ".huggingface")


def local_hashes(source: str, deadline) -> dict:
    """path -> FileHash (both digests: sha256 and git blob id) of every regular file under a local folder
    (or of one file), read once within the command's deadline; hidden git/cache folders are skipped, links
    to things that are not regular files are never read."""
    import hashlib

    from archprobe.formats.hub import FileHash
    from archprobe.formats.limits import cap

    if os.path.isfile(source):
        files = {os.path.basename(source): source}
    else:
        files = {}
        for root, dirs, names in os.walk(source):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(names):
                full = os.path.join(root, name)
                files[os.path.relpath(full, source).replace(os.sep, "/")] = full
                if len(files) > cap("MAX_LISTING_FILES"):
                    raise SourceError(f"{source}: over {cap('MAX_LISTING_FILES'):,} files; refused")
    out = {}
    for rel, full in files.items():
        if not os.path.isfile(full):          # a dangling link, a device, a fifo
            continue
        size = os.path.getsize(full)
        sha, git = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size)
        with open(full, "rb") as f:
            while chunk := f.read(8 << 20):
                deadline.check(f"{source}: hashing {rel}")
                sha.update(chunk)
                git.update(chunk)
        out[rel] = FileHash(size, sha.hexdigest(), git.hexdigest(), None)
    return out


def files_only_doc(a: str, b: str, limit: int = LIMIT) -> dict:
    """The `archprobe.diff/1` document with only the file section (`diff --files-only`)."""
    from archprobe.diff.headers import SCHEMA

    files = file_diff(a, b, limit)
    label = lambda s: {"location": s, "kind": "hub" if is_hub_source(s) else "local"}  # noqa: E731
    return {"schema": SCHEMA, "a": label(a), "b": label(b), "identical": files["identical"], "files": files}


def add_files(doc: dict, a: str, b: str, limit: int = LIMIT) -> dict:
    """Adds the file section to a header diff of two hub sources (a local side: unchanged); byte changes with
    identical headers (a re-upload with new values) make the pair not identical; a mirror's own README does
    not (`model_identical`: every file but the docs)."""
    if is_hub_source(a) and is_hub_source(b):
        doc["files"] = file_diff(a, b, limit)
        doc["identical"] = doc["identical"] and doc["files"]["model_identical"]
    return doc
