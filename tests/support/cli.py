"""The CLI as a user runs it, in a child process: `run` (what it printed and its exit status) and its
bounded variant `run_cli` + `assert_bounded` (also the wall time and the child's own peak RSS, VmHWM of
the process after exec: see cli_child.py), which every hostile case is held to; and in this process:
`invoke`, the one in-process runner (typer's CliRunner over archprobe.cli.main's app), for tests that need
monkeypatching or speed rather than a fresh interpreter."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# the bounds every hostile case is held to (defaults; a case may state tighter ones)
RSS_BOUND = 400 * 2**20       # the CLI itself (typer, rich, numpy, huggingface_hub) is ~100-150 MB
WALL_BOUND_S = 30.0           # every case below sets deadlines of a few seconds
FAST_ENV = {"ARCHPROBE_DEADLINE_S": "4", "ARCHPROBE_REQUEST_DEADLINE_S": "3"}


def run(*args, env=None):
    """`archprobe ARGS` in a child process (this interpreter, the caller's environment plus `env`)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "archprobe.cli.main", *args], capture_output=True, text=True,
                          env=full_env, timeout=300)


def invoke(*args: str, env: dict | None = None):
    """`archprobe ARGS` in this process: click's Result (exit_code, stdout, stderr, output, exception).
    `env` is set for the call only. Imported here, so `run`/`run_cli` users do not load the CLI."""
    from typer.testing import CliRunner

    from archprobe.cli.main import app

    return CliRunner().invoke(app, list(args), env=env)


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str
    wall_s: float
    rss_bytes: int


def run_cli(*args: str, env: dict | None = None, timeout: float = 120.0, cwd: str | None = None,
            wrap: tuple[str, ...] = ()) -> Result:
    """wrap: a command line the child is run under (e.g. `unshare -m sh -c 'mount ...; exec "$@"' -`)."""
    full = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src") + os.pathsep + ROOT,
            "HF_HUB_DISABLE_PROGRESS_BARS": "1", "COLUMNS": "200", **(env or {})}
    if "ARCHPROBE_DEBUG" not in (env or {}):
        full.pop("ARCHPROBE_DEBUG", None)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as tmp:
        full["ARCHPROBE_TEST_RSS_FILE"] = rss_file = os.path.join(tmp, "rss")
        start = time.monotonic()
        p = subprocess.Popen([*wrap, sys.executable, os.path.join(ROOT, "tests", "support", "cli_child.py"), *args],
                             stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=full, cwd=cwd)
        killer = threading.Timer(timeout, lambda: os.kill(p.pid, signal.SIGKILL))
        killer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            killer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        rss = int(open(rss_file).read()) if os.path.exists(rss_file) else usage.ru_maxrss * 1024
        return Result(p.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"), wall,
                      rss)


def assert_bounded(r: Result, *, ok: bool | None = None, contains: str | None = None,
                   rss: int = RSS_BOUND, wall_s: float = WALL_BOUND_S, statuses: tuple = (0, 2)) -> None:
    """The promise for every hostile case: exit 0 or 2 (or `statuses`: 1 where a check found what it looks
    for), at most one line on stderr, no traceback, no ANSI escape on any stream, within the memory and
    time bounds."""
    assert r.rc in statuses, (r.rc, r.stderr[-2000:])
    if ok is not None:
        assert (r.rc == 0) == ok, (r.rc, r.stderr[-2000:])
    assert len(r.stderr.strip().splitlines()) <= 1, r.stderr[-2000:]
    assert "Traceback" not in r.stderr + r.stdout
    assert "\x1b" not in r.stderr + r.stdout
    if r.rc == 2:
        assert r.stderr.startswith(("error: ", "internal error: ")), r.stderr
        assert not r.stderr.startswith("internal error"), r.stderr   # hostile input is a user-level error
    if contains:
        assert contains in r.stderr + r.stdout, r.stderr[-2000:]
    assert r.rss_bytes <= rss, f"peak RSS {r.rss_bytes / 2**20:.0f} MiB > {rss / 2**20:.0f} MiB"
    assert r.wall_s <= wall_s, f"{r.wall_s:.1f} s > {wall_s} s"
