"""Fresh, verified workspaces for agentic attempts (T2, T3) and isolated test commands.

Each attempt gets its own copy of the starting repository; the copy's tree hash must equal the
task set's before the attempt starts. Test commands run with a wall-clock limit in their own process
group and, where the OS allows it (Linux, root, `unshare`), in a fresh network namespace. The policy
actually applied is returned so the ledger can state it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from archprobe.errors import ArchprobeError

SKIP_DIRS = {".git", "__pycache__", ".pytest_cache"}
MAX_FILE_WRITE = 1 << 20


def tree_hash(root: Path) -> str:
    """sha256 over (path, executable bit, content hash) of every file, sorted; symlinks by target."""
    h = hashlib.sha256(b"archprobe.tree/1\0")
    for path in sorted(_walk(root)):
        full = root / path
        if full.is_symlink():
            h.update(f"L\0{path}\0{os.readlink(full)}\0".encode())
            continue
        mode = "x" if os.access(full, os.X_OK) else "-"
        h.update(f"F\0{path}\0{mode}\0".encode())
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


def fresh_copy(src: Path, dst: Path, expected_hash: str) -> str:
    """Copy the starting repository and prove the copy is byte-identical to what was hashed."""
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(*SKIP_DIRS))
    got = tree_hash(dst)
    if got != expected_hash:
        raise ArchprobeError(f"{src}: the starting repository changed since the task set was loaded "
                             f"({got} != {expected_hash})", hint="reload the task set; its hash is now different")
    return got


def write_files(workspace: Path, files: dict[str, str]) -> list[str]:
    """Apply a model's file edits; paths must stay inside the workspace (hostile input)."""
    written = []
    root = workspace.resolve()
    for rel, content in files.items():
        target = (root / rel).resolve()
        if not target.is_relative_to(root) or target == root or len(content) > MAX_FILE_WRITE:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        written.append(target.relative_to(root).as_posix())
    return written


@functools.cache
def network_isolation() -> tuple[list[str], str]:
    """The command prefix that removes the network, and the policy it gives, probed once."""
    if sys.platform == "linux" and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("unshare"):
        try:
            ok = subprocess.run(["unshare", "--net", "--", "true"], capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return ["unshare", "--net", "--"], "no network (fresh network namespace, loopback down)"
    return [], "host network (isolation needs Linux, root and unshare)"


@dataclass
class CommandResult:
    exit_code: int | None      # None: killed at the wall-clock limit
    output: str
    seconds: float
    network_policy: str


def run_command(command: str, cwd: Path, timeout_s: float, isolate_network: bool = True,
                env: dict | None = None) -> CommandResult:
    import time

    prefix, policy = network_isolation() if isolate_network else ([], "host network (by request)")
    start = time.perf_counter()
    proc = subprocess.Popen([*prefix, "sh", "-c", command], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **(env or {})})
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code = None
    text = out.decode("utf-8", "replace")[-4000:]
    return CommandResult(code, text, time.perf_counter() - start, policy)
