"""Where archprobe keeps what it caches (the demo checkpoint, fetched validate tensors, compiled kernels).

One owner, so one variable moves all of it (tests isolate every cache with ARCHPROBE_CACHE):
ARCHPROBE_CACHE when set, else $XDG_CACHE_HOME/archprobe, else ~/.cache/archprobe. As the XDG Base
Directory spec says, a relative XDG_CACHE_HOME is invalid and ignored (it would write under whatever
folder the command ran in). None when no absolute place is known (no home directory).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path | None:
    own = os.environ.get("ARCHPROBE_CACHE")
    if own:
        return Path(os.path.abspath(os.path.expanduser(own)))
    xdg = os.environ.get("XDG_CACHE_HOME") or ""
    if os.path.isabs(xdg):
        return Path(xdg) / "archprobe"
    home = os.path.expanduser("~")
    return Path(home) / ".cache" / "archprobe" if os.path.isabs(home) else None
