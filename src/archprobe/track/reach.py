"""Reach snapshots from a model hub: downloads, likes, files and shards, last modified."""

from __future__ import annotations

import os
from datetime import datetime

from archprobe.errors import SourceError


def hub_reach(repo_id: str, endpoint: str | None = None) -> list[tuple[str, float]]:
    """(metric, value) pairs for one repo, from the hub's model-info API (HF_ENDPOINT, HF_TOKEN)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT"), token=os.environ.get("HF_TOKEN"))
    try:
        info = api.model_info(repo_id)
    except GatedRepoError:
        raise SourceError(f"{repo_id}: gated on the hub", hint="set HF_TOKEN to an account with access") from None
    except RepositoryNotFoundError:
        raise SourceError(f"{repo_id}: no such model repo on the hub") from None
    except (HfHubHTTPError, OSError) as exc:
        raise SourceError(f"{repo_id}: the hub did not answer ({type(exc).__name__}: {str(exc)[:200]})") from None
    files = [s.rfilename for s in info.siblings or []]
    out = [("files", float(len(files))),
           ("shards", float(sum(f.endswith((".safetensors", ".gguf")) for f in files)))]
    if info.downloads is not None:
        out.append(("downloads_30d", float(info.downloads)))
    if info.likes is not None:
        out.append(("likes", float(info.likes)))
    modified = info.last_modified
    if isinstance(modified, datetime):
        out.append(("last_modified_unix", modified.timestamp()))
    return out
