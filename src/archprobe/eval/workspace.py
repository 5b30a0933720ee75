"""Workspaces for agentic attempts: verified fresh copies (T2, T3) and file operations that a hostile
model cannot turn against the harness.

Why so careful: the harness runs as the invoking user (often root) and touches files that model code
has had its hands on. Every path a model names is checked (no NUL, not absolute, no `..`, bounded
length); every walk is by `lstat`, so a symlink the model planted is never followed when the harness
reads, writes or restores; FIFOs and devices are refused instead of read (a read could hang forever).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from archprobe.errors import ArchprobeError
from archprobe.formats.limits import MAX_FILE_WRITE, MAX_NAME_CHARS, MAX_PATH_CHARS

SKIP_DIRS = {".git", "__pycache__", ".pytest_cache"}


class EditError(ValueError):
    """A path or edit the model sent cannot be applied: the model's doing, scored, never a harness error."""


def tree_hash(root: Path) -> str:
    """sha256 over (path, executable bit, content hash) of every file, sorted; symlinks by target."""
    h = hashlib.sha256(b"archprobe.tree/1\0")
    for rel in sorted(_walk(root)):
        full = root / rel
        st = full.lstat()
        if stat.S_ISLNK(st.st_mode):
            h.update(f"L\0{rel}\0{os.readlink(full)}\0".encode())
            continue
        mode = "x" if st.st_mode & 0o111 else "-"
        h.update(f"F\0{rel}\0{mode}\0".encode())
        h.update(hashlib.sha256(full.read_bytes()).digest())
    return "sha256:" + h.hexdigest()


def _walk(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in filenames:
            yield (Path(dirpath) / name).relative_to(root).as_posix()
        for name in dirnames:
            if (Path(dirpath) / name).is_symlink():
                yield (Path(dirpath) / name).relative_to(root).as_posix()


def check_starting_repo(root: Path) -> None:
    """Refuse a starting repository that could leak or hang: symlinks leaving it, FIFOs, devices, sockets."""
    base = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in [*filenames, *dirnames]:
            full = Path(dirpath) / name
            st = full.lstat()
            rel = full.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(full)
                resolved = (full.parent / target).resolve()
                if os.path.isabs(target) or not resolved.is_relative_to(base):
                    raise ArchprobeError(f"{root}: symlink {rel} -> {target} leaves the starting repository",
                                         hint="a starting repository may only link to its own files")
            elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise ArchprobeError(f"{root}: {rel} is not a regular file or folder (FIFO, device or socket)")


def fresh_copy(src: Path, dst: Path, expected_hash: str) -> str:
    """Copy the starting repository and prove the copy is byte-identical to what was hashed."""
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(*SKIP_DIRS))
    got = tree_hash(dst)
    if got != expected_hash:
        raise ArchprobeError(f"{src}: the starting repository changed since the task set was loaded "
                             f"({got} != {expected_hash})", hint="reload the task set; its hash is now different")
    return got


def clean_relpath(rel) -> list[str]:
    """The components of a path a model sent, or EditError saying why it is not a workspace path."""
    if not isinstance(rel, str) or not rel.strip():
        raise EditError("empty path")
    if "\0" in rel:
        raise EditError("path holds a NUL byte")
    if len(rel) > MAX_PATH_CHARS:
        raise EditError(f"path longer than {MAX_PATH_CHARS} characters")
    if rel.startswith(("/", "\\")) or (len(rel) > 1 and rel[1] == ":"):
        raise EditError(f"absolute path {rel[:80]!r}")
    parts = [p for p in rel.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts:
        raise EditError(f"path {rel[:80]!r} names the workspace itself")
    for p in parts:
        if p == "..":
            raise EditError(f"path {rel[:80]!r} leaves the workspace")
        if len(p.encode()) > MAX_NAME_CHARS:
            raise EditError(f"a name in {rel[:80]!r} is longer than {MAX_NAME_CHARS} bytes")
    return parts


def _real_parent(root: Path, parts: list[str], create: bool) -> Path:
    """The parent folder of `parts` under root, reached without following any symlink."""
    here = root
    for p in parts[:-1]:
        here = here / p
        try:
            st = here.lstat()
        except FileNotFoundError:
            if not create:
                raise EditError(f"no such folder {'/'.join(parts[:-1])!r}") from None
            here.mkdir()
            continue
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            if not create:
                raise EditError(f"{here.relative_to(root).as_posix()!r} is not a folder")
            remove_path(here)
            here.mkdir()
    return here


def safe_write(root: Path, rel: str, content: str | bytes, *, replace_any: bool = False) -> str:
    """Write one file under root. A model's write into a folder is an EditError; with replace_any
    (the harness restoring a pristine file) whatever sits at the path is removed first."""
    parts = clean_relpath(rel)
    data = content.encode() if isinstance(content, str) else content
    if len(data) > MAX_FILE_WRITE and not replace_any:
        raise EditError(f"{rel[:80]!r}: more than {MAX_FILE_WRITE:,} bytes")
    parent = _real_parent(root, parts, create=True)
    target = parent / parts[-1]
    try:
        st = target.lstat()
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISDIR(st.st_mode) and not replace_any:
            raise EditError(f"{rel[:80]!r} names a folder")
        remove_path(target)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return "/".join(parts)


def safe_read(root: Path, rel: str, limit: int = 256 * 1024) -> str:
    """Read a regular file under root (never through a symlink, never a FIFO), at most `limit` bytes."""
    parts = clean_relpath(rel)
    target = _real_parent(root, parts, create=False) / parts[-1]
    try:
        st = target.lstat()
    except FileNotFoundError:
        raise EditError(f"no such file {rel[:80]!r}") from None
    if stat.S_ISLNK(st.st_mode):
        raise EditError(f"{rel[:80]!r} is a symlink; the harness does not follow links")
    if not stat.S_ISREG(st.st_mode):
        raise EditError(f"{rel[:80]!r} is not a regular file")
    fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    text = data[:limit].decode("utf-8", "replace")
    return text + (f"\n[... truncated at {limit:,} bytes]" if len(data) > limit else "")


def listing(root: Path, limit: int = 2000) -> list[str]:
    """Relative paths of regular files (symlinks shown as `path -> target`, never followed)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames) + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            out.append(f"{rel} -> {os.readlink(full)}" if full.is_symlink() else rel)
            if len(out) >= limit:
                return out
    return out


def repo_text(root: Path, limit: int = 200_000) -> str:
    """The repository's regular files as `FILE: path` blocks for a prompt; symlinks are never followed."""
    parts, total = [], 0
    for rel in listing(root):
        if " -> " in rel:
            parts.append(f"LINK: {rel}\n")
            continue
        try:
            text = safe_read(root, rel, limit)
        except EditError:
            continue
        total += len(text)
        if total > limit:
            break
        parts.append(f"FILE: {rel}\n```\n{text if text.endswith(chr(10)) else text + chr(10)}```\n")
    return "".join(parts)


def restore(root: Path, pristine: Path, rels: list[str]) -> list[str]:
    """Put files back from the pristine tree before a test runs; returns those the attempt had changed."""
    changed = []
    for rel in rels:
        source = pristine / rel
        if not source.is_file() or source.is_symlink():
            continue
        want = source.read_bytes()
        try:
            have = safe_read_bytes(root, rel, len(want) + 1)
        except (EditError, OSError):
            have = None
        if have != want:
            changed.append(rel)
            safe_write(root, rel, want, replace_any=True)
            if os.access(source, os.X_OK):
                (root / rel).chmod(0o755)
    return changed


def safe_read_bytes(root: Path, rel: str, limit: int) -> bytes:
    parts = clean_relpath(rel)
    target = _real_parent(root, parts, create=False) / parts[-1]
    st = target.lstat()
    if not stat.S_ISREG(st.st_mode):
        raise EditError(f"{rel!r} is not a regular file")
    fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit)


def remove_path(path: Path) -> None:
    st = path.lstat()
    if stat.S_ISDIR(st.st_mode):
        remove_tree(path)
    else:
        path.unlink()


def remove_tree(path: Path) -> bool:
    """rmtree that also clears folders a model made unreadable (chmod 000); True when gone."""
    if not os.path.lexists(path):
        return True
    _unlock(path)
    shutil.rmtree(path, ignore_errors=True)
    return not os.path.lexists(path)


def _unlock(path: Path) -> None:
    """Give every folder under path (never through a symlink) owner rwx, so it can be listed and emptied."""
    stack = [path]
    while stack:
        here = stack.pop()
        try:
            if not stat.S_ISDIR(here.lstat().st_mode):
                continue
            here.chmod(0o700)
            stack.extend(here / e.name for e in os.scandir(here) if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
