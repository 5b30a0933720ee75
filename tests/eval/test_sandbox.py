"""The sandbox on its own: deadline, daemons, output cap, uid, network, read-only host, and the fallback."""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from archprobe.eval import sandbox
from archprobe.eval.workspace import remove_tree


@pytest.fixture
def attempt(tmp_path):
    work = tmp_path / "attempt"
    ws = work / "repo"
    ws.mkdir(parents=True)
    (ws / "hello.py").write_text("print('hello')\n")
    uid = sandbox.prepare(work, ws)
    yield work, ws, uid
    assert remove_tree(work)


def alive(mark: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


def test_a_daemon_holding_stdout_dies_with_the_command(attempt):
    work, ws, uid = attempt
    mark = uuid.uuid4().hex
    start = time.perf_counter()
    res = sandbox.run_sandboxed(f"setsid sh -c 'sleep 300 # {mark}' & echo started", work, ws, 10, uid=uid)
    assert res.exit_code == 0 and "started" in res.output
    assert time.perf_counter() - start < 5, "the harness did not wait for the daemon"
    time.sleep(0.2)
    assert not alive(mark)


def test_the_deadline_kills_everything_and_output_is_capped(attempt):
    work, ws, uid = attempt
    mark = uuid.uuid4().hex
    start = time.perf_counter()
    res = sandbox.run_sandboxed(f"sh -c 'sleep 300; : {mark}' & yes", work, ws, 1.0, uid=uid,
                                limits=sandbox.Limits(output_bytes=4096))
    took = time.perf_counter() - start
    assert res.timed_out and res.exit_code is None and took < 1.0 + 5
    assert len(res.output) == 4096 and res.truncated_bytes == res.output_bytes - 4096 > 0
    time.sleep(0.2)
    assert not alive(mark)


@pytest.mark.skipif(sandbox.probe()[0] != "namespaces", reason="needs root and unshare")
def test_namespaces_uid_network_and_read_only_host(attempt, tmp_path):
    work, ws, uid = attempt
    mark = uuid.uuid4().hex
    outside = [f"/tmp/{mark}", f"{tmp_path}/{mark}", f"{Path.home()}/{mark}"]
    script = ("import os, socket\nprint('uid', os.getuid())\n"
              + "".join(f"try:\n    open({p!r}, 'w')\n    print('WROTE', {p!r})\nexcept OSError:\n    pass\n"
                        for p in outside)
              + "open('inside.txt', 'w').write('ok')\nimport tempfile\ntempfile.TemporaryFile().write(b'x')\n"
              + "try:\n    socket.create_connection(('1.1.1.1', 80), timeout=2)\n    print('NETWORK')\n"
              + "except OSError:\n    print('no network')\nprint('pids', len([p for p in os.listdir('/proc') "
              + "if p.isdigit()]))\n")
    (ws / "probe.py").write_text(script)
    res = sandbox.run_sandboxed(f"{sys.executable} probe.py", work, ws, 20, uid=uid)
    assert res.exit_code == 0, res.output
    assert f"uid {uid}" in res.output and uid != 0
    assert "WROTE" not in res.output and "NETWORK" not in res.output and "no network" in res.output
    assert int(res.output.split("pids ")[1].split()[0]) <= 4, "a fresh PID namespace sees only its own"
    assert (ws / "inside.txt").read_text() == "ok"
    assert not any(Path(p).exists() for p in outside)
    assert res.policy.startswith("sandbox: own PID/mount/network namespaces")


def test_the_process_group_fallback_still_kills_daemons(attempt, monkeypatch):
    work, ws, _ = attempt
    monkeypatch.setattr(sandbox, "probe", lambda: ("process-group", []))
    mark = uuid.uuid4().hex
    res = sandbox.run_sandboxed(f"setsid sh -c 'sleep 300 # {mark}' > /dev/null 2>&1 & echo started", work, ws, 10,
                                uid=None)
    assert res.exit_code == 0 and res.policy.startswith("sandbox: process group and rlimits only")
    assert res.survivors_killed >= 1, "the token sweep found the daemon"
    time.sleep(0.2)
    assert not alive(mark)


@pytest.mark.skipif(sandbox.probe()[0] == "process-group", reason="needs namespaces")
def test_killing_archprobe_itself_kills_the_sandboxed_command(tmp_path):
    import json
    import signal
    import subprocess

    mark = uuid.uuid4().hex
    (tmp_path / "set" / "repo").mkdir(parents=True)
    (tmp_path / "set" / "repo" / "a.txt").write_text("x\n")
    task = {"id": "t", "prompt": "p", "scorer": "command", "repo": "repo", "test_command": "true",
            "agent_command": f"sh -c 'sleep 300; : {mark}'"}
    (tmp_path / "set" / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    tmp_root = Path(os.environ.get("TMPDIR", "/tmp"))
    before = set(tmp_root.glob("archprobe-attempt-*"))
    proc = subprocess.Popen([sys.executable, "-m", "archprobe.cli.main", "eval", "run", str(tmp_path / "set"),
                             "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--attempts", "1",
                             "--ledger", str(tmp_path / "l.sqlite"), "--no-progress", "--json"],
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not alive(mark) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert alive(mark), "the test command never started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 5
    while alive(mark) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(mark), "the sandboxed command outlived a SIGKILLed archprobe"
    for left in set(tmp_root.glob("archprobe-attempt-*")) - before:   # a SIGKILLed run cannot remove its own
        remove_tree(left)
