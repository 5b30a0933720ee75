"""Reach snapshots from a model hub: downloads, likes, files and shards, last modified.

The hub's model-info answer is read through formats/http.py (capped at MAX_LISTING_BYTES, within the
command's deadline); every number in it is checked to be a finite, non-negative number.
"""

from __future__ import annotations

import math
import os
from datetime import datetime

from archprobe.errors import SourceError


def hub_reach(repo_id: str, endpoint: str | None = None) -> list[tuple[str, float]]:
    """(metric, value) pairs for one repo, from the hub's model-info API (HF_ENDPOINT, HF_TOKEN)."""
    from archprobe.formats.http import GuardedHTTP
    from archprobe.formats.hub import auth_headers, check_repo_id, request
    from archprobe.formats.hub import endpoint as hub_endpoint
    from archprobe.formats.jsontext import load_fast
    from archprobe.formats.limits import Deadline, cap

    check_repo_id(repo_id, "main")
    base = (endpoint or os.environ.get("HF_ENDPOINT") or hub_endpoint()).rstrip("/")
    http = GuardedHTTP(Deadline(), auth_headers())
    resp = request(http, f"{base}/api/models/{repo_id}", cap("MAX_LISTING_BYTES"), f"{repo_id} (model info)")
    if resp.status in (401, 403):
        raise SourceError(f"{repo_id}: gated on the hub", hint="set HF_TOKEN to an account with access")
    if resp.status == 404:
        raise SourceError(f"{repo_id}: no such model repo on the hub")
    if resp.status != 200:
        raise SourceError(f"{repo_id}: the hub answered HTTP {resp.status}")
    try:
        info = load_fast(resp.body, f"{repo_id} (model info)", "the model info", cap("MAX_LISTING_BYTES"))
    except Exception as exc:
        raise SourceError(getattr(exc, "message", str(exc))) from None
    siblings = info.get("siblings") if isinstance(info.get("siblings"), list) else []
    files = [s.get("rfilename") for s in siblings if isinstance(s, dict) and isinstance(s.get("rfilename"), str)]
    out = [("files", float(len(files))),
           ("shards", float(sum(f.endswith((".safetensors", ".gguf")) for f in files)))]
    for key, metric in (("downloads", "downloads_30d"), ("likes", "likes")):
        value = _count(info.get(key))
        if value is not None:
            out.append((metric, value))
    modified = info.get("lastModified")
    if isinstance(modified, str):
        try:
            out.append(("last_modified_unix", datetime.fromisoformat(modified.replace("Z", "+00:00")).timestamp()))
        except (ValueError, OverflowError, OSError):
            pass
    return out


def _count(value) -> float | None:
    """A count from the hub: a finite non-negative number, else nothing (a hostile answer is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and 0 <= value < 1e18 else None
