"""The embedded demo: a small K3-shaped checkpoint (exact K3 tensor families and names, small
widths, real MXFP4-packed experts) written once into a cache folder, so `archprobe inspect` with no
argument works offline on a fresh machine.
"""

from __future__ import annotations

import os
from pathlib import Path

DEMO_NAME = "tiny-k3-v1"


def cache_dir() -> Path:
    """archprobe's cache folder (cachedir.py: ARCHPROBE_CACHE, an absolute XDG_CACHE_HOME, ~/.cache);
    with no home directory, one in the temp dir named for this user."""
    import tempfile

    from archprobe.cachedir import cache_root

    root = cache_root()
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return root if root is not None else Path(tempfile.gettempdir()) / f"archprobe-cache-{uid}"


def demo_checkpoint(folder: str | os.PathLike | None = None) -> Path:
    """Path of the demo checkpoint, written on first use (2 shards, ~1 MB, deterministic)."""
    from archprobe.writers.synthetic import tiny_k3_dims, write_k3_checkpoint

    path = Path(folder) if folder else cache_dir() / DEMO_NAME
    if not (path / "config.json").is_file():
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        write_k3_checkpoint(tmp, tiny_k3_dims(), shards=2, sparse=False, seed=0)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(tmp, path)
        except OSError:  # another process won the race; its copy is identical
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return path

