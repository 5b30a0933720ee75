"""Opening local checkpoint files: only regular files inside the checkpoint folder, never anything else.

A folder is hostile input too: a FIFO named `x.gguf` blocks `open()` for ever, a device reads without
end, a symlink can point at `/etc/shadow` or at another user's files. Every local read of a
checkpoint goes through `open_inside` (or `regular_file_inside` for libraries that open the path
themselves, such as `safetensors.safe_open`): the path is resolved, must stay inside the folder,
and is opened with O_NONBLOCK (so a FIFO cannot block) and checked with fstat to be a regular file,
the very file that was resolved.
"""

from __future__ import annotations

import os
import stat

from archprobe.errors import CheckpointError


def _resolve(folder: str, path: str) -> str:
    try:
        real = os.path.realpath(path, strict=True)
    except OSError as exc:
        loop = getattr(exc, "errno", 0) == 40 or "loop" in str(exc).lower()
        raise CheckpointError(path, "cannot open: " + ("symlink loop" if loop else exc.strerror or str(exc))) from None
    root = os.path.realpath(folder)
    if os.path.commonpath([root, real]) != root:
        raise CheckpointError(path, "resolves to a file outside the checkpoint folder; refused")
    return real


def regular_file_inside(folder: str, path: str) -> str:
    """`path`, checked: it resolves inside `folder` and is a regular file (no FIFO, device, socket)."""
    real = _resolve(folder, path)
    try:
        st = os.stat(real)
    except OSError as exc:
        raise CheckpointError(path, f"cannot open: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(path, f"not a regular file ({_kind(st.st_mode)}); refused")
    return path


def open_inside(folder: str, path: str):
    """A binary file object for `path`, a regular file inside `folder` (see the module docstring)."""
    real = _resolve(folder, path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        raise CheckpointError(path, f"cannot open: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CheckpointError(path, f"not a regular file ({_kind(st.st_mode)}); refused")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_capped(folder: str, path: str, limit: int, what: str) -> bytes:
    """The whole of a small file (config, index), refused past `limit` bytes without reading on."""
    with open_inside(folder, path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise CheckpointError(path, f"{what} is {size:,} bytes, over the {limit:,}-byte cap")
        try:
            raw = f.read(limit + 1)
        except OSError as exc:
            raise CheckpointError(path, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise CheckpointError(path, f"{what} is over the {limit:,}-byte cap")
    return raw


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a plain file"
