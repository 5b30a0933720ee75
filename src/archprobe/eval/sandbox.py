"""Run one command of an agentic attempt in a sandbox that a hostile model cannot outlast or escape.

What runs where (probed once, the policy string goes into the ledger with every command):
- `namespaces`: Linux, started as root, `unshare` works. Fresh PID, mount and network namespaces
  (loopback only), every mount read-only except the workspace and a capped tmpfs for TMPDIR, the
  command as an unprivileged uid (one per concurrent command, from UID_BASE), rlimits for address
  space, CPU seconds, processes, file size and open files. The deadline SIGKILLs PID 1 of the
  namespace, which takes every process in it along (setsid daemons included).
- `userns`: Linux, not root, unprivileged user namespaces allowed: the same namespaces, but the
  command keeps the invoking uid (there is no other uid to drop to).
- `process-group`: anything else (macOS, containers without unshare): own process group and
  session, rlimits, host network unless the caller accepts that; a final sweep kills any process that
  carries the attempt's token in its environment. Weaker, and said so in the policy string.

Output never sits in memory: the command writes to a pipe that is drained into a file capped at
`output_bytes`; the excess is counted and dropped. The caller owns the attempt folder and removes it.
"""

from __future__ import annotations

import functools
import itertools
import marshal
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

INIT = Path(__file__).with_name("_sandbox_init.py")
UID_BASE = 61000
UID_SLOTS = 2000
_uid_counter = itertools.count()
_uid_lock = threading.Lock()


@dataclass
class Limits:
    memory_bytes: int = 4 << 30       # RLIMIT_AS per process
    cpu_s: int | None = None          # RLIMIT_CPU; None: the command's timeout + 1
    processes: int = 256              # RLIMIT_NPROC for the command's own uid
    file_bytes: int = 256 << 20       # RLIMIT_FSIZE: largest file the command may write
    open_files: int = 512
    output_bytes: int = 1 << 20       # stdout+stderr kept; the rest counted and dropped
    tmp_bytes: int = 64 << 20         # the tmpfs behind TMPDIR


@dataclass
class CommandResult:
    exit_code: int | None             # None: killed at the deadline
    output: str                       # the tail of what was kept
    output_bytes: int                 # everything the command wrote
    truncated_bytes: int              # written but not kept
    seconds: float
    policy: str
    survivors_killed: int = 0         # processes the final sweep had to kill (0 in namespaces)

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None

    def summary(self, tail: int = 2000) -> dict:
        return {"exit_code": self.exit_code, "timed_out": self.timed_out, "seconds": round(self.seconds, 3),
                "output_bytes": self.output_bytes, "truncated_bytes": self.truncated_bytes,
                "survivors_killed": self.survivors_killed, "network": self.policy,
                "output_tail": self.output[-tail:]}


@functools.cache
def probe() -> tuple[str, list[str]]:
    """(mode, unshare prefix) for this host; see the module docstring."""
    if sys.platform != "linux" or not shutil.which("unshare"):
        return "process-group", []
    base = ["unshare", "--pid", "--mount", "--net", "--fork", "--kill-child", "--mount-proc"]
    # if archprobe itself is killed (even SIGKILL), the kernel kills unshare, and with it the namespace
    guard = ["setpriv", "--pdeathsig", "KILL"] if _works(["setpriv", "--pdeathsig", "KILL", "true"]) else []
    for mode, prefix in (("namespaces", [*guard, *base]),
                         ("userns", [*guard, *base[:1], "--user", "--map-root-user", *base[1:]])):
        if mode == "namespaces" and os.geteuid() != 0:
            continue
        if _works([*prefix, "true"]):
            return mode, prefix
    return "process-group", []


def _works(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def policy_text(mode: str, network: bool) -> str:
    if mode == "namespaces":
        return ("sandbox: own PID/mount/network namespaces, filesystem read-only but the workspace, "
                "unprivileged uid, rlimits; " + ("host network (by request)" if network else "no network"))
    if mode == "userns":
        return ("sandbox: own user/PID/mount/network namespaces, filesystem read-only but the workspace, "
                "invoking uid, rlimits; " + ("host network (by request)" if network else "no network"))
    return "sandbox: process group and rlimits only (no namespaces on this host); host network"


def _next_uid() -> int:
    with _uid_lock:
        return UID_BASE + next(_uid_counter) % UID_SLOTS


def prepare(attempt_dir: Path, workspace: Path) -> int | None:
    """Make the workspace writable by the uid that will run commands in it; returns that uid."""
    mode, _ = probe()
    attempt_dir.chmod(0o711)
    (attempt_dir / "tmp").mkdir(mode=0o777, exist_ok=True)
    if mode != "namespaces":
        return None
    uid = _next_uid()
    for dirpath, dirnames, filenames in os.walk(workspace):
        for name in [*dirnames, *filenames]:
            os.chown(Path(dirpath) / name, uid, uid, follow_symlinks=False)
    os.chown(workspace, uid, uid)
    return uid


def run_sandboxed(command: str, attempt_dir: Path, workspace: Path, timeout_s: float, *, uid: int | None,
                  limits: Limits | None = None, network: bool = False, env: dict | None = None) -> CommandResult:
    """Run `sh -c command` in workspace; never longer than timeout_s (+ the kill), never more output
    in memory than limits.output_bytes."""
    limits = limits or Limits()
    mode, prefix = probe()
    if network and mode != "process-group":
        prefix = [p for p in prefix if p != "--net"]
    token = uuid.uuid4().hex
    tmp = attempt_dir / "tmp"
    child_env = {"PATH": os.environ.get("ARCHPROBE_SANDBOX_PATH",
                                        f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"),
                 "HOME": str(workspace), "TMPDIR": str(tmp), "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                 "ARCHPROBE_SANDBOX": token, **(env or {})}
    cfg = {"workspace": str(workspace.resolve()), "tmp": str(tmp.resolve()), "command": command,
           "env": child_env, "uid": uid,
           "expose": sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.realpath(sys.executable),
                             str(workspace.resolve()), str(tmp.resolve()),
                             *filter(None, os.environ.get("ARCHPROBE_SANDBOX_EXPOSE", "").split(":"))}),
           "lock_fs": mode != "process-group", "tmp_bytes": limits.tmp_bytes,
           "limits": {**asdict(limits), "cpu_s": limits.cpu_s or int(timeout_s) + 2}}
    argv = [*prefix, sys.executable, "-I", "-S", str(INIT), marshal.dumps(cfg).hex()]
    start = time.perf_counter()
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=write_fd, stderr=write_fd, cwd=workspace,
                                start_new_session=True, env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
                                close_fds=True)
    finally:
        os.close(write_fd)
    kept, total, timed_out = bytearray(), 0, False
    deadline = start + timeout_s
    try:
        total, timed_out = _drain(proc, read_fd, kept, limits.output_bytes, deadline)
    finally:
        os.close(read_fd)
        if proc.poll() is None:
            _kill(proc)
    survivors = sweep(token)
    code = None if timed_out else proc.returncode
    text = kept.decode("utf-8", "replace")
    return CommandResult(code, text, total, total - len(kept), time.perf_counter() - start,
                         policy_text(mode, network), survivors)


def _drain(proc: subprocess.Popen, fd: int, kept: bytearray, cap: int, deadline: float) -> tuple[int, bool]:
    """Read the command's output until it ends (or the deadline); keep `cap` bytes, count the rest."""
    total, timed_out = 0, False
    exited_at = None
    while True:
        now = time.perf_counter()
        if proc.poll() is not None and exited_at is None:
            exited_at = now
        if exited_at is not None and now - exited_at > 0.5:
            break     # the command ended; a writer that outlives it gets no more of our time
        if now >= deadline and exited_at is None:
            timed_out = True
            _kill(proc)
            exited_at = time.perf_counter()
            continue
        wait = min(0.1, max(0.0, deadline - now)) if exited_at is None else 0.05
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            if exited_at is None:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.perf_counter()))
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _kill(proc)
            break
        total += len(chunk)
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
    return total, timed_out


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the process group; in namespaces, PID 1 dying takes the whole namespace with it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def sweep(token: str) -> int:
    """Kill any process still carrying this command's token in its environment; returns how many."""
    if not os.path.isdir("/proc"):
        return 0
    needle = f"ARCHPROBE_SANDBOX={token}".encode()
    killed, quiet = 0, 0
    for _ in range(5):      # two clean passes in a row: a process in mid-execve shows an empty environ once
        found = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if needle not in f.read(1 << 20):
                        continue
                os.kill(int(entry.name), signal.SIGKILL)
                found += 1
            except (OSError, ValueError):
                continue
        killed += found
        quiet = 0 if found else quiet + 1
        if quiet == 2:
            break
        time.sleep(0.02 if not found else 0.05)
    return killed
