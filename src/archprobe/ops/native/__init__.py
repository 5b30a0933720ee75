"""Small C kernels for the CPU, compiled on first use by this machine's own C compiler and cached.

Why: on a CPU the linear recurrences (KDA, Gated DeltaNet, Mamba-2's SSD) are bound by memory passes and
per-call dispatch when written as torch ops; one C loop that keeps a strip of the state in cache for the
whole sequence does the same arithmetic in one pass per token. Nothing here is required: where no compiler
works, or ARCHPROBE_NATIVE=0, `library` returns None (with one warning saying why) and the ops run their
torch forms.
Only the C sources shipped in this package are compiled; nothing from a checkpoint is compiled or loaded.
A cached library is loaded only from a directory that this user owns and nobody else can write, and only
if its bytes hash to what this process's build recorded beside it (a truncated or planted file is rebuilt).
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

SOURCES = Path(__file__).parent
# -march=native: the library is built on, and only for, the machine that runs it (its cache key holds the
# CPU's identity); the second set is for compilers that do not know -march=native.
FLAG_SETS = (["-O3", "-march=native"], ["-O3"])
COMMON = ["-std=gnu11", "-ffp-contract=fast", "-fno-math-errno", "-shared", "-fPIC", "-pthread"]
VERSION_SECONDS, COMPILE_SECONDS = 10, 60
SYMBOLS = {"recurrences": ("delta_rule_forward", "ssd_forward")}

_reasons: dict[str, str] = {}


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


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess | str:
    """cmd's result, or why it did not finish; on a timeout the whole process group (the compiler's own
    children too) is killed."""
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    except OSError as e:
        return f"{shlex.join(cmd[:1])} failed to run: {e.strerror or e}"
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        return f"{shlex.join(cmd[:1])} did not finish in {timeout:.0f} s"
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _private(d: Path) -> bool:
    """d is a directory of this user's that no one else can write into."""
    try:
        st = d.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o022:
        return False
    return not hasattr(os, "getuid") or st.st_uid == os.getuid()


@functools.cache
def _process_dir() -> Path:
    """A private directory for this process alone, removed at exit (where no shared cache is safe)."""
    d = Path(tempfile.mkdtemp(prefix="archprobe-native-"))
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


def _cache_dirs() -> list[Path]:
    """Where a library may be cached, best first: the user's cache directory, then one in the temp dir
    named for this user; each only if private (`_private`)."""
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if not home.startswith("~") else "")
    uid = os.getuid() if hasattr(os, "getuid") else 0
    candidates = ([Path(base) / "archprobe" / "native"] if os.path.isabs(base) else []) + \
        [Path(tempfile.gettempdir()) / f"archprobe-native-{uid}"]
    dirs = []
    for d in candidates:
        try:
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            pass
        if _private(d) and d.parent.exists():
            dirs.append(d)
    return dirs


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _verified(target: Path) -> bool:
    """The library is this user's, writable by no one else, and hashes to what its build recorded."""
    try:
        st = target.lstat()
        recorded = target.with_name(target.name + ".sha256").read_text().strip()
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o022:
        return False
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False
    return _digest(target) == recorded


def _compile(source: bytes, cc: list[str], flags: list[str], target: Path) -> str | None:
    """Builds target (and its recorded hash) atomically; None, or why it could not."""
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src, out = Path(tmp) / target.with_suffix(".c").name, Path(tmp) / target.name
        src.write_bytes(source)
        run = _run([*cc, *flags, *COMMON, "-o", str(out), str(src), "-lm"], COMPILE_SECONDS)
        if isinstance(run, str):
            return run
        if run.returncode != 0:
            return f"{shlex.join(cc)} {' '.join(flags)}: " + (run.stderr.strip().splitlines() or ["failed"])[-1]
        digest = Path(tmp) / (target.name + ".sha256")
        digest.write_text(_digest(out))
        os.replace(digest, target.with_name(target.name + ".sha256"))
        os.replace(out, target)   # atomic: a concurrent process sees no library or a whole one
    return None


def _build(name: str, source: bytes, cc: list[str], version: str) -> Path | str:
    """The compiled library's path, or why it could not be built."""
    dirs = _cache_dirs() or [_process_dir()]
    last = "no flag set tried"
    for flags in FLAG_SETS:
        key = hashlib.sha256(b"\0".join([source, shlex.join(cc + flags + COMMON).encode(), version.encode(),
                                         _cpu_identity().encode()])).hexdigest()[:20]
        for d in dirs:
            if _verified(d / f"{name}-{key}.so"):
                return d / f"{name}-{key}.so"
        failed = dirs[0] / f"{name}-{key}.failed"   # a compiler that refused these flags, remembered
        if failed.is_file():
            last = failed.read_text(errors="replace").strip() or "failed before"
            continue
        for d in dirs:
            why = _compile(source, cc, flags, d / f"{name}-{key}.so")
            if why is None:
                return d / f"{name}-{key}.so"
            if "did not finish" in why or "failed to run" in why:
                return why            # the compiler itself is the problem: no second flag set
            if "No such file" in why or "Permission denied" in why or "Read-only" in why:
                last = why
                continue              # this directory, not the compiler: try the next one
            last = why
            try:
                failed.write_text(why)
            except OSError:
                pass
            break
    return last


@functools.cache
def _load(name: str) -> ctypes.CDLL | None:
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
    try:
        lib = ctypes.CDLL(str(built))
    except OSError as e:
        return _unavailable(name, f"could not load {built.name}: {e}")
    missing = [s for s in SYMBOLS.get(name, ()) if not hasattr(lib, s)]
    if missing:
        return _unavailable(name, f"{built.name} lacks {', '.join(missing)}")
    return lib


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
    print(f"archprobe native kernels: {lib._name}")
    return 0
