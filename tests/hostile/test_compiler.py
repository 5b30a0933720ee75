"""The native kernels' compiler step against a hostile or broken CC (child process): one that prints
for ever, one that leaves a detached helper holding its output, one that writes a library that does not
load. Each ends in the kernels off with the reason, within the time and memory bounds, and nothing bad
is cached. And the cache paths follow the XDG rules (a relative XDG_CACHE_HOME is ignored)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.support.cli import ROOT, assert_bounded, run_cli

CHILD = ("import atexit, sys\n"
         "def rss():\n"
         "    for line in open('/proc/self/status'):\n"
         "        if line.startswith('VmHWM:'): sys.stderr.write('RSS ' + line.split()[1] + '\\n')\n"
         "atexit.register(rss)\n"
         "from archprobe.ops.native import main\n"
         "main()\n")

VERSION = 'if [ "$1" = --version ]; then echo "fakecc 1.0"; exit 0; fi\n'
CCS = {
    "prints for ever": VERSION + "yes 'warning: this goes on'\n",
    "leaves a helper holding its output": VERSION + "setsid sh -c 'sleep 45' &\nexit 1\n",
    "writes a library that does not load": VERSION + ('while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
                                                    'echo "not an ELF" > "$out"\nexit 0\n'),
}


def build_with(tmp_path, script: str):
    cc = tmp_path / "cc.sh"
    cc.write_text("#!/bin/sh\n" + script)
    cc.chmod(0o755)
    env = {**os.environ, "CC": str(cc), "ARCHPROBE_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.path.join(ROOT, "src")}
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    rss = int(next(line for line in p.stderr.splitlines() if line.startswith("RSS ")).split()[1]) * 1024
    return p, time.monotonic() - start, rss


@pytest.mark.parametrize("case", sorted(CCS))
def test_a_hostile_compiler_ends_in_the_torch_forms_in_bounded_time(tmp_path, case):
    p, wall, rss = build_with(tmp_path, CCS[case])
    assert p.returncode == 0, p.stderr[-2000:]
    assert "not built" in p.stdout, p.stdout
    assert wall < 40, f"{wall:.1f} s"
    assert rss < 400 * 2**20, f"{rss / 2**20:.0f} MiB"
    cached = list((tmp_path / "cache").rglob("*.so")) if (tmp_path / "cache").exists() else []
    assert not cached, f"a library that failed was cached: {cached}"


def test_a_library_that_does_not_load_is_not_cached_for_the_next_process(tmp_path):
    build_with(tmp_path, CCS["writes a library that does not load"])
    p, _, _ = build_with(tmp_path, VERSION + "exec cc \"$@\"\n")   # a working compiler, same version line
    assert "built; cached as" in p.stdout, p.stdout


def test_a_relative_xdg_cache_home_is_ignored(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    r = run_cli("inspect", "--json", cwd=str(work),
                env={"ARCHPROBE_CACHE": "", "XDG_CACHE_HOME": "relative-cache", "HOME": str(home)})
    assert_bounded(r, ok=True)
    assert os.listdir(work) == [], "nothing written under the folder the command ran in"
    assert (home / ".cache" / "archprobe").is_dir()
