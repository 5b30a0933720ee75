"""Small C kernels for the CPU, compiled on first use by this machine's own C compiler and cached.

Why: on a CPU the linear recurrences (KDA, Gated DeltaNet) are bound by memory passes and per-call
dispatch when written as torch ops; one C loop that keeps a strip of the state in L1 for the whole
sequence does the same arithmetic in one pass per token. Nothing here is required: where no compiler
works, or ARCHPROBE_NATIVE=0, `library` returns None and the ops run their torch forms.
Only the C sources shipped in this package are compiled; nothing from a checkpoint is compiled or loaded.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import subprocess
import tempfile
from pathlib import Path

SOURCES = Path(__file__).parent
# -march=native: the library is built on, and only for, the machine that runs it (its cache key holds the
# CPU's identity); the second set is for compilers that do not know -march=native.
FLAG_SETS = (["-O3", "-march=native"], ["-O3"])
COMMON = ["-std=gnu11", "-ffp-contract=fast", "-fno-math-errno", "-shared", "-fPIC", "-pthread"]
COMPILE_SECONDS = 120

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


def _compiler_version(cc: list[str]) -> str | None:
    try:
        run = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return run.stdout if run.returncode == 0 else None


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for d in (Path(base) / "archprobe" / "native",
              Path(tempfile.gettempdir()) / f"archprobe-native-{os.getuid() if hasattr(os, 'getuid') else 0}"):
        try:
            d.mkdir(parents=True, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            continue
    return Path(tempfile.mkdtemp(prefix="archprobe-native-"))


def _build(name: str, source: bytes, cc: list[str], version: str) -> Path | str:
    """The compiled library's path, or why it could not be built."""
    last = "no flag set tried"
    for flags in FLAG_SETS:
        key = hashlib.sha256(b"\0".join([source, shlex.join(cc + flags + COMMON).encode(), version.encode(),
                                         _cpu_identity().encode()])).hexdigest()[:20]
        target = _cache_dir() / f"{name}-{key}.so"
        if target.exists():
            return target
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            src, out = Path(tmp) / f"{name}.c", Path(tmp) / f"{name}.so"
            src.write_bytes(source)
            try:
                run = subprocess.run([*cc, *flags, *COMMON, "-o", str(out), str(src), "-lm"],
                                     capture_output=True, text=True, timeout=COMPILE_SECONDS)
            except (OSError, subprocess.SubprocessError) as e:
                last = f"{shlex.join(cc)} failed to run: {e}"
                continue
            if run.returncode != 0:
                last = f"{shlex.join(cc)} {' '.join(flags)}: " + (run.stderr.strip().splitlines() or ["failed"])[-1]
                continue
            os.replace(out, target)   # atomic: a concurrent process sees no library or a whole one
            return target
    return last


@functools.cache
def _load(name: str) -> ctypes.CDLL | None:
    source = (SOURCES / f"{name}.c").read_bytes()
    try:   # CC may carry arguments ("ccache gcc"), as make reads it
        cc = shlex.split(os.environ.get("CC") or "cc")
    except ValueError:
        cc = []
    version = _compiler_version(cc) if cc else None
    if version is None:
        _reasons[name] = f"no working C compiler (CC={os.environ.get('CC') or 'cc'})"
        return None
    built = _build(name, source, cc, version)
    if isinstance(built, str):
        _reasons[name] = built
        return None
    try:
        return ctypes.CDLL(str(built))
    except OSError as e:
        _reasons[name] = f"could not load {built.name}: {e}"
        return None


def library(name: str) -> ctypes.CDLL | None:
    """The kernel library `name` (`<name>.c` beside this module), compiled on first use; None where it
    cannot be (see `unavailable_reason`)."""
    return _load(name) if enabled() else None


def main() -> int:
    """`python -m archprobe.ops.native`: build the kernels now (make install runs it), say where or why not."""
    lib = library("recurrences")
    if lib is None:
        print(f"archprobe native kernels: not built ({unavailable_reason('recurrences')}); "
              "the ops run their PyTorch forms")
        return 0
    print(f"archprobe native kernels: {lib._name}")
    return 0
