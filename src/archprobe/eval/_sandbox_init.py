"""PID 1 of an attempt's namespaces (standard library only, run with `python -I -S`; the config comes
as marshal, not JSON, because importing json costs more than everything else this script does).

Started by `unshare --pid --mount --net --fork --kill-child --mount-proc` (see sandbox.py), as root of
fresh namespaces. It makes every mount read-only except the workspace and a size-capped tmpfs for
temporary files, then forks the command as an unprivileged uid with rlimits, reaps everything, and
exits with the command's status. When this process ends, the kernel kills every process left in the
PID namespace (setsid daemons included); the harness SIGKILLs it at the deadline.
"""

import ctypes
import marshal
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_NOATIME, MS_NODIRATIME, MS_REMOUNT, MS_BIND, MS_REC = 1024, 2048, 32, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
PR_SET_NO_NEW_PRIVS = 38
OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}

libc = ctypes.CDLL(None, use_errno=True)


def mount(source, target, fstype, flags, data=None) -> int:
    def enc(s):
        return None if s is None else s.encode()

    rc = libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    return 0 if rc == 0 else ctypes.get_errno()


def mount_points() -> list[tuple[str, str]]:
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")
            out.append((point, fields[5]))
    return out


def blocked_ancestor(path: str):
    """(the first folder on the way to path that others may not enter, the next name below it)."""
    parts = [p for p in path.split("/") if p]
    here = "/"
    for n, name in enumerate(parts):
        try:
            if not os.stat(here).st_mode & 0o001:
                return here, name
        except OSError:
            return None
        here = os.path.join(here, name)
        if n == len(parts) - 1:
            return None
    return None


def expose(paths: list[str]) -> None:
    """Let the unprivileged uid reach the interpreter and its workspace when they sit under a folder
    others may not enter (a 0700 /root or TMPDIR): a fresh tmpfs over that folder holds only the
    needed entries, bound from the original (reached through an O_PATH descriptor); the rest is hidden."""
    for _ in range(8):                 # nested blocked folders are opened one level per round
        wanted: dict[str, set[str]] = {}
        for p in paths:
            hit = blocked_ancestor(os.path.realpath(p))
            if hit:
                wanted.setdefault(hit[0], set()).add(hit[1])
        if not wanted:
            return
        for folder, names in sorted(wanted.items()):
            fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
            if mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755"):
                os.close(fd)
                return
            for name in names:
                src, dst = f"/proc/self/fd/{fd}/{name}", os.path.join(folder, name)
                if os.path.isdir(src):
                    os.mkdir(dst, 0o755)
                else:
                    open(dst, "w").close()
                mount(src, dst, None, MS_BIND | MS_REC)
            os.close(fd)


def lock_filesystem(cfg: dict) -> int:
    """Everything read-only but the workspace and the tmpfs; returns how many remounts failed."""
    ws, tmp = cfg["workspace"], cfg["tmp"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    if cfg.get("uid") is not None:
        expose(cfg.get("expose", []))
    if mount(ws, ws, None, MS_BIND | MS_REC):
        raise SystemExit("sandbox: cannot bind the workspace")
    if mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, f"size={cfg['tmp_bytes']},mode=1777"):
        raise SystemExit("sandbox: cannot mount the temporary folder")
    failed = 0
    for point, options in mount_points():
        if point in (ws, tmp) or point.startswith((ws + "/", tmp + "/")):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for opt in options.split(","):
            flags |= OPTION_FLAGS.get(opt, 0)
        failed += mount(None, point, None, flags) != 0
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=1777")
    return failed


def become_unprivileged(cfg: dict) -> None:
    limits = cfg["limits"]
    for name, value in (("RLIMIT_AS", limits["memory_bytes"]), ("RLIMIT_CPU", limits["cpu_s"]),
                        ("RLIMIT_NPROC", limits["processes"]), ("RLIMIT_FSIZE", limits["file_bytes"]),
                        ("RLIMIT_NOFILE", limits["open_files"]), ("RLIMIT_CORE", 0)):
        if value is not None and hasattr(resource, name):
            try:
                resource.setrlimit(getattr(resource, name), (value, value))
            except (ValueError, OSError):
                pass
    uid = cfg.get("uid")
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def main() -> None:
    cfg = marshal.loads(bytes.fromhex(sys.argv[1]))   # written by sandbox.py with this interpreter
    if cfg.get("lock_fs"):
        lock_filesystem(cfg)
    child = os.fork()
    if child == 0:
        try:
            os.chdir(cfg["workspace"])
            become_unprivileged(cfg)
            os.execve("/bin/sh", ["sh", "-c", cfg["command"]], cfg["env"])
        except BaseException as exc:  # noqa: BLE001 - the child must never return into this script
            os.write(2, f"sandbox: could not start the command: {exc}\n".encode())
            os._exit(126)
    status = 0
    while True:           # reap everything reparented to us; stop when the command itself ends
        try:
            pid, st = os.wait()
        except ChildProcessError:
            break
        if pid == child:
            status = st
            break
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
