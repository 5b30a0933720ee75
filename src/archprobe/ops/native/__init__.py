"""Small C kernels for the CPU, compiled on first use by this machine's own C compiler and cached.

Why: on a CPU the linear recurrences (KDA, Gated DeltaNet, Mamba-2's SSD) are bound by memory passes and
per-call dispatch when written as torch ops; one C loop that keeps a strip of the state in cache for the
whole sequence does the same arithmetic in one pass per token. Nothing here is required: where no compiler
works, or ARCHPROBE_NATIVE=0, `library` returns None (with one warning saying why) and the ops run their
torch forms.
Only the C sources shipped in this package are compiled; nothing from a checkpoint is compiled or loaded.
A cached library is read only from a directory that this user owns and nobody else can write (checked on
the open directory, never through a link), only if its bytes hash to what its build recorded beside it (a
truncated or planted file is rebuilt), and what is loaded is a copy of exactly those bytes in this
process's own mkdtemp directory. A compiler that fails or hangs (killed after COMPILE_SECONDS) is not
remembered across processes: each new process tries again.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import warnings
from pathlib import Path

from archprobe.formats.limits import MAX_LIBRARY_BYTES, MAX_TOOL_OUTPUT

SOURCES = Path(__file__).parent
# -march=native: the library is built on, and only for, the machine that runs it (its cache key holds the
# CPU's identity); the second set is for compilers that do not know -march=native.
FLAG_SETS = (["-O3", "-march=native"], ["-O3"])
COMMON = ["-std=gnu11", "-ffp-contract=fast", "-fno-math-errno", "-shared", "-fPIC", "-pthread"]
VERSION_SECONDS, COMPILE_SECONDS = 10, 30
SYMBOLS = {"recurrences": ("delta_rule_forward", "ssd_forward")}

_reasons: dict[str, str] = {}
_cached_at: dict[str, Path] = {}   # where each loaded library is cached for later processes


def enabled() -> bool:
    return os.environ.get("ARCHPROBE_NATIVE", "1").strip().lower() not in ("0", "false", "no", "off")


def unavailable_reason(name: str) -> str | None:
    """Why `library(name)` is None (None while it loads, or before it was asked for)."""
    if not enabled():
        return "ARCHPROBE_NATIVE=0"
    return _reasons.get(name)


def _cpu_identity() -> str:
    """What -march=native depends on: the architecture and, on Linux, the CPU's model and feature flags."""
    parts = [platform.machine(), platform.system()]
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith(("model name", "flags", "Features", "CPU part")):
                parts.append(line)
                if len(parts) > 5:
                    break
    except OSError:
        pass
    return "\n".join(parts)




def _cap_file_size() -> None:
    """In the compiler's process, before exec: no file it writes (its output, the library) may grow past
    MAX_LIBRARY_BYTES, so a CC that prints for ever is stopped by SIGXFSZ, not by a full disk."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_LIBRARY_BYTES + 1, MAX_LIBRARY_BYTES + 1))
    except (ImportError, ValueError, OSError):
        pass


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess | str:
    """cmd's result, or why it did not finish. Its output goes to files, not pipes, and only the first
    MAX_TOOL_OUTPUT bytes of each are read: a CC that prints for ever fills a file under a time bound,
    not our memory, and a helper it left behind holding the output cannot keep us waiting for an end of
    file. On a timeout the whole process group (the compiler's own children too) is killed."""
    try:
        out, err = tempfile.TemporaryFile(dir=_process_dir()), tempfile.TemporaryFile(dir=_process_dir())
    except OSError as e:
        return f"no room to run {shlex.join(cmd[:1])}: {e.strerror or e}"
    with out, err:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
                                    preexec_fn=_cap_file_size)
        except OSError as e:
            return f"{shlex.join(cmd[:1])} failed to run: {e.strerror or e}"
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            return f"{shlex.join(cmd[:1])} did not finish in {timeout:.0f} s"
        try:   # a helper that outlived it may still write: the process group goes with the compiler
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read(MAX_TOOL_OUTPUT).decode(errors="replace"))
    return subprocess.CompletedProcess(cmd, proc.returncode, *texts)


@functools.cache
def _process_dir() -> Path:
    """A directory of this process alone (mkdtemp: mode 0700, an unpredictable name), removed at exit.
    Every library is built here, and every cached one is copied here after its bytes were checked, so what
    is loaded is exactly what was built or checked, whatever happens to the cache's paths meanwhile."""
    d = Path(tempfile.mkdtemp(prefix="archprobe-native-"))
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


def _owned_privately(st: os.stat_result) -> bool:
    return not st.st_mode & 0o022 and (not hasattr(os, "getuid") or st.st_uid == os.getuid())


def _open_dir(d: Path) -> int | None:
    """d opened (never through a symbolic link) where it is a directory of this user's that no one else can
    write; None otherwise. Checked on the open descriptor, so swapping the path afterwards changes nothing."""
    try:
        fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode) and _owned_privately(st):
        return fd
    os.close(fd)
    return None


def _make_private_dirs(d: Path) -> None:
    """mkdir -p with mode 0700 for every directory it creates (a umask of 0 would leave them open)."""
    missing = []
    while not d.exists() and d != d.parent:
        missing.append(d)
        d = d.parent
    for m in reversed(missing):
        try:
            os.mkdir(m, 0o700)
        except FileExistsError:
            pass


def _cache_dirs() -> list[Path]:
    """Where a library may be cached, best first: the user's cache directory, then one in the temp dir
    named for this user; each only if it is private (`_open_dir`)."""
    from archprobe.cachedir import cache_root

    root = cache_root()
    uid = os.getuid() if hasattr(os, "getuid") else 0
    candidates = ([root / "native"] if root is not None else []) + \
        [Path(tempfile.gettempdir()) / f"archprobe-native-{uid}"]
    dirs = []
    for d in candidates:
        try:
            _make_private_dirs(d)
        except OSError:
            continue
        fd = _open_dir(d)
        if fd is not None:
            os.close(fd)
            dirs.append(d)
    return dirs


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_private(dir_fd: int, name: str) -> bytes | None:
    """The bytes of `name` in the open directory, where it is a regular file of this user's that no one
    else can write (opened without following links); None otherwise."""
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _owned_privately(st) or st.st_size > MAX_LIBRARY_BYTES:
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def _cached(d: Path, so_name: str) -> bytes | None:
    """The cached library's bytes, where they hash to what its build recorded beside it (a truncated or
    replaced file is not loaded: a truncated library killed the process with SIGBUS)."""
    fd = _open_dir(d)
    if fd is None:
        return None
    try:
        data, recorded = _read_private(fd, so_name), _read_private(fd, so_name + ".sha256")
    finally:
        os.close(fd)
    if data is None or recorded is None or _digest(data) != recorded.decode(errors="replace").strip():
        return None
    return data


def _write_private(d: Path, name: str, data: bytes) -> None:
    """Writes `name` into the private directory d atomically (a temporary file, then a rename, both
    relative to d's open descriptor)."""
    fd = _open_dir(d)
    if fd is None:
        raise PermissionError(f"{d} is not a private directory")
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600, dir_fd=fd)
        with os.fdopen(out, "wb") as f:
            f.write(data)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError:
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass
        raise
    finally:
        os.close(fd)


def _compile(source: bytes, cc: list[str], flags: list[str], so_name: str) -> Path | str:
    """Builds the library in this process's own directory; its path, or why it could not be built."""
    try:
        work = Path(tempfile.mkdtemp(dir=_process_dir()))
        src, out = work / so_name.replace(".so", ".c"), work / so_name
        src.write_bytes(source)
    except OSError as e:
        return f"no room to build in: {e.strerror or e}"
    run = _run([*cc, *flags, *COMMON, "-o", str(out), str(src), "-lm"], COMPILE_SECONDS)
    if isinstance(run, str):
        return run
    if run.returncode != 0:
        lines = [line for line in run.stderr.strip().splitlines() if "error" in line.lower()] or \
            run.stderr.strip().splitlines() or ["failed"]
        return f"{shlex.join(cc)} {' '.join(flags)}: {lines[0]}"
    return out


def _build(name: str, source: bytes, cc: list[str], version: str) -> Path | str:
    """A loadable copy of the library in this process's own directory: from a cache whose bytes check out,
    else compiled (and then cached where a private cache directory can take it); or why there is none."""
    last = "no flag set tried"
    for flags in FLAG_SETS:
        key = hashlib.sha256(b"\0".join([source, shlex.join(cc + flags + COMMON).encode(), version.encode(),
                                         _cpu_identity().encode()])).hexdigest()[:20]
        so_name = f"{name}-{key}.so"
        try:
            dirs = _cache_dirs()
            for d in dirs:
                data = _cached(d, so_name)
                if data is not None:
                    copy = Path(tempfile.mkdtemp(dir=_process_dir())) / so_name
                    copy.write_bytes(data)
                    _cached_at[name] = d / so_name
                    return copy
        except OSError as e:   # a full disk or a read-only temp dir: compile below, or say why not
            dirs, last = [], f"could not copy the cached library: {e.strerror or e}"
        built = _compile(source, cc, flags, so_name)
        if isinstance(built, str):
            last = built
            if "did not finish" in built or "failed to run" in built or "no room" in built:
                return built          # the compiler or the disk, not the flags: no second flag set
            continue
        checked = _load_check(name, built)
        if isinstance(checked, str):
            return checked            # never cached: a later process would load it and fail the same way
        data = built.read_bytes()
        for d in dirs:                # cache it for later processes; a cache that cannot take it is skipped
            try:
                _write_private(d, so_name + ".sha256", _digest(data).encode())
                _write_private(d, so_name, data)
                _cached_at[name] = d / so_name
                break
            except OSError:
                continue
        return built
    return last


def _load_check(name: str, built: Path) -> ctypes.CDLL | str:
    """The fresh library loaded, with its symbols; or why not (too large, unloadable, symbols missing)."""
    try:
        size = built.stat().st_size
    except OSError as e:
        return f"the built library cannot be read: {e.strerror or e}"
    if size > MAX_LIBRARY_BYTES:
        return f"the built library is {size:,} bytes, over the {MAX_LIBRARY_BYTES:,}-byte cap"
    try:
        lib = ctypes.CDLL(str(built))
    except OSError as e:
        return f"could not load {built.name}: {str(e)[:200]}"
    missing = [s for s in SYMBOLS.get(name, ()) if not hasattr(lib, s)]
    if missing:
        return f"{built.name} lacks {', '.join(missing)}"
    return lib


@functools.cache
def _load(name: str) -> ctypes.CDLL | None:
    try:
        return _load_or_raise(name)
    except OSError as e:   # a full disk, an unreadable temp dir: the torch forms run, with the reason said
        return _unavailable(name, f"{e.strerror or e}: {e.filename}" if e.filename else str(e))


def _load_or_raise(name: str) -> ctypes.CDLL | None:
    source = (SOURCES / f"{name}.c").read_bytes()
    try:   # CC may carry arguments ("ccache gcc"), as make reads it
        cc = shlex.split(os.environ.get("CC") or "cc")
    except ValueError:
        cc = []
    version = _run([*cc, "--version"], VERSION_SECONDS) if cc else "CC is empty"
    if isinstance(version, str) or version.returncode != 0:
        return _unavailable(name, f"no working C compiler (CC={os.environ.get('CC') or 'cc'}"
                            + (f": {version}" if isinstance(version, str) else "") + ")")
    built = _build(name, source, cc, version.stdout)
    if isinstance(built, str):
        return _unavailable(name, built)
    lib = _load_check(name, built)
    return _unavailable(name, lib) if isinstance(lib, str) else lib


def _unavailable(name: str, reason: str) -> None:
    _reasons[name] = reason
    warnings.warn(f"archprobe: the native {name} kernels are not available ({reason}); the ops run their "
                  "PyTorch forms, several times slower on the CPU (ARCHPROBE_NATIVE=0 silences this)",
                  RuntimeWarning, stacklevel=4)
    return None


def library(name: str) -> ctypes.CDLL | None:
    """The kernel library `name` (`<name>.c` beside this module), compiled on first use; None where it
    cannot be (see `unavailable_reason`)."""
    return _load(name) if enabled() else None


def kernel(symbol: str, argtypes: list, name: str = "recurrences"):
    """The C function `symbol` of library `name`, typed (returns int: 0, or nonzero out of memory), or None."""
    lib = library(name)
    if lib is None:
        return None
    f = getattr(lib, symbol)
    f.argtypes, f.restype = argtypes, ctypes.c_int
    return f


def forward_only_on_cpu(*tensors) -> bool:
    """The kernels run forward passes on CPU tensors: nothing may need a gradient."""
    present = [x for x in tensors if x is not None]
    if any(x.device.type != "cpu" for x in present):
        return False
    import torch

    return not (torch.is_grad_enabled() and any(x.requires_grad for x in present))


def main() -> int:
    """`python -m archprobe.ops.native`: build the kernels now (make install runs it), say where or why not."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = library("recurrences")
    if lib is None:
        print(f"archprobe native kernels: not built ({unavailable_reason('recurrences')}); "
              "the ops run their PyTorch forms")
        return 0
    cached = _cached_at.get("recurrences")
    print(f"archprobe native kernels: built; cached as {cached}" if cached else
          f"archprobe native kernels: built (no private cache directory to keep them in: {lib._name})")
    return 0
