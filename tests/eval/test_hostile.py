"""A hostile endpoint cannot raise its success rate, outlast its deadline, leak processes or write outside.

The same decision (right or wrong) is made for every attempt key by an honest server and by a hostile
one; where the honest server answers wrongly, the hostile one answers malformed, huge, endless, with
daemons, test rewrites, path escapes or planted symlinks. The success rates must be equal and every
outcome must be what the server log says the model did.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from archprobe.eval.report import build_report
from archprobe.eval.runner import RunOptions, run_eval
from archprobe.eval.tasks import load_task_set
from tests.support.eval_sets import FIX, WRONG, agentic_set
from tests.support.rss import peak_rss_growth
from tests.support.scripted import ScriptedServer, completion

RIGHT = {0, 3, 6, 9}
CHAT_KINDS = ["deep_body", "deep_content", "not_json", "huge", "endless", "no_choices", "content_number",
              "tool_junk", "gzip_bomb"]


def decide(key: str) -> bool:
    sample = int(key.split("/")[1])
    return sample in RIGHT


def chat_set(root: Path) -> None:
    root.mkdir()
    with open(root / "tasks.jsonl", "w") as f:
        for i in range(3):
            f.write(json.dumps({"id": f"sum-{i}", "prompt": f"{i}+{i}? JSON", "scorer": "json_match",
                                "target": {"v": 2 * i}}) + "\n")


def chat_respond(hostile: bool):
    def respond(key, body, entry):
        task = key.split("/")[0]
        i = int(task.split("-")[1])
        if decide(key):
            entry["action"] = "right"
            return 200, completion(json.dumps({"v": 2 * i})), {}
        sample = int(key.split("/")[1])
        kind = CHAT_KINDS[(sample + i) % len(CHAT_KINDS)] if hostile else "wrong"
        entry["action"] = "wrong:" + kind
        if kind == "wrong":
            return 200, completion(json.dumps({"v": -1})), {}
        if kind == "deep_body":
            return 200, b"[" * 200_000 + b"]" * 200_000, {}
        if kind == "deep_content":
            return 200, completion("[" * 100_000 + "]" * 100_000), {}
        if kind == "not_json":
            return 200, b"<html>surprise</html>", {}
        if kind == "huge":
            return 200, (b" " * (1 << 20) for _ in range(40)), {}
        if kind == "endless":
            return 200, (b" " * (1 << 20) for _ in iter(int, 1)), {}
        if kind == "no_choices":
            return 200, json.dumps({"choices": []}).encode(), {}
        if kind == "content_number":
            return 200, json.dumps({"choices": [{"message": {"content": 42}}]}).encode(), {}
        if kind == "tool_junk":
            return 200, json.dumps({"choices": [{"message": {"content": "", "tool_calls": "x"}}]}).encode(), {}
        import gzip

        return 200, gzip.compress(b"[" * (64 << 20)), {"Content-Encoding": "gzip"}
    return respond


def test_malformed_answers_exactly_where_it_would_fail_do_not_change_the_rate(tmp_path, ledger):
    chat_set(tmp_path / "set")
    ts = load_task_set(tmp_path / "set")
    opts = RunOptions(endpoint="", model="m", attempts=10, concurrency=8, timeout_s=20, max_retries=1,
                      backoff_s=0.01)
    rates, logs = {}, {}
    with peak_rss_growth() as rss:
        for hostile in (False, True):
            with ScriptedServer(chat_respond(hostile)) as srv:
                opts.endpoint = srv.url
                run_id = run_eval(ledger, ts, opts, run_id=f"hostile={hostile}")
                logs[hostile] = {e["attempt"]: e["action"] for e in srv.log}
            report = build_report(ledger, run_id)
            rates[hostile] = report["success_rate"]
            assert report["outcomes"]["error"] == 0 and report["outcomes"]["timeout"] == 0, report["outcomes"]
            for row in ledger.attempts(run_id):
                action = logs[hostile][f"{row.task_id}/{row.sample}/{row.try_}"]
                assert row.outcome == ("pass" if action == "right" else "fail"), (action, row.detail)
                if hostile and action != "wrong:deep_content":
                    assert action == "right" or row.detail["fault"] == "model", (action, row.detail)
    assert set(logs[True].values()) >= {"wrong:" + k for k in CHAT_KINDS}, "every hostile kind was sent"
    assert rates[True] == rates[False] == pytest.approx(len(RIGHT) / 10)
    # 500 MB for archprobe in all, less the ~50 MB an idle archprobe process holds before the run
    assert rss.bytes < 450 << 20, f"the harness grew by {rss.bytes >> 20} MB"
    # the same hostile run from the CLI in a fresh process: its peak RSS is archprobe's own
    with ScriptedServer(chat_respond(True)) as srv:
        rss_kb, doc = cli_peak_rss("run", str(tmp_path / "set"), "--endpoint", srv.url, "--model", "m",
                                   "--attempts", "10", "--ledger", str(tmp_path / "cli.sqlite"), "--timeout", "20",
                                   "--max-retries", "1", "--backoff", "0.01", "--no-progress", "--json")
    assert doc["success_rate"] == pytest.approx(len(RIGHT) / 10) and doc["outcomes"]["error"] == 0
    assert rss_kb < 500 * 1024, f"archprobe peaked at {rss_kb / 1024:.0f} MB"


def cli_peak_rss(*args) -> tuple[int, dict]:
    """Run `archprobe eval ARGS` in a new process; (its peak RSS in KiB, its JSON output).

    VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork and exec, so a child of a large pytest
    process would report the parent's size; VmHWM belongs to the new process's own memory map."""
    import subprocess

    code = ("import sys\nfrom archprobe.cli.main import app\ntry:\n    app(sys.argv[1:])\n"
            "except SystemExit:\n    pass\nhwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
            "sys.stderr.write(f'MAXRSS {hwm[0].split()[1]}\\n')\n")
    r = subprocess.run([sys.executable, "-c", code, "eval", *args], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    rss = int(r.stderr.rsplit("MAXRSS ", 1)[1].split()[0])
    return rss, json.loads(r.stdout)


# -- agentic -------------------------------------------------------------------------------------

AGENT_KINDS = ["nul_path", "dir_path", "long_path", "escape_path", "rewrite_test", "daemon", "endless_output",
               "symlink_read", "symlink_write", "write_outside", "memory", "deep_args"]


def file_reply(path: str, content: str) -> bytes:
    return completion(f"FILE: {path}\n```python\n{content}```\n")


def agentic_respond(hostile: bool, mark: str, pristine: Path):
    def respond(key, body, entry):
        base, _, turn = key.partition("#")
        sample = int(base.split("/")[1])
        if decide(base):
            entry["action"] = "right"
            return 200, file_reply("calc.py", FIX), {}
        wrong_index = sample - sum(1 for r in RIGHT if r < sample)     # the n-th sample that answers wrongly
        kind = AGENT_KINDS[wrong_index % len(AGENT_KINDS)] if hostile else "wrong"
        entry["action"] = "wrong:" + kind
        if kind == "wrong" or turn:             # a later turn: give up with a wrong fix
            return 200, file_reply("calc.py", WRONG), {}
        if kind == "nul_path":
            return 200, file_reply("calc\0.py", FIX), {}
        if kind == "dir_path":
            return 200, file_reply("pkg", FIX), {}
        if kind == "long_path":
            return 200, file_reply("a" * 5000 + ".py", FIX), {}
        if kind == "escape_path":
            return 200, file_reply(f"../../archprobe-{mark}.py", FIX), {}
        if kind == "rewrite_test":
            return 200, completion(f"FILE: test_calc.py\n```\nprint('ok')\n```\nFILE: test_hidden.py\n```\n"
                                   f"print('ok')\n```\nFILE: calc.py\n```\n{WRONG}```\n"), {}
        if kind == "daemon":
            return 200, file_reply("calc.py", "import subprocess\nsubprocess.Popen(['setsid', 'sh', '-c', "
                                   f"'sleep 300 # {mark}'])\n" + WRONG), {}
        if kind == "endless_output":
            return 200, file_reply("calc.py", "while True:\n    print('x' * 4096)\n"), {}
        if kind == "symlink_read":
            return 200, completion(tool_calls=[{"name": "run", "args": {"command": "ln -s /etc/hostname leak"}},
                                               {"name": "read_file", "args": {"path": "leak"}}]), {}
        if kind == "symlink_write":
            return 200, completion(tool_calls=[{"name": "run", "args": {"command": f"ln -s {pristine} evil"}},
                                               {"name": "write_file", "args": {"path": f"evil/{mark}.py",
                                                                               "content": "x"}}]), {}
        if kind == "write_outside":
            targets = [f"/tmp/archprobe-{mark}", f"/root/archprobe-{mark}", f"{pristine}/{mark}",
                       f"/dev/shm/archprobe-{mark}"]
            code = "".join(f"try:\n    open({t!r}, 'w').write('x')\nexcept OSError:\n    pass\n" for t in targets)
            return 200, file_reply("calc.py", code + WRONG), {}
        if kind == "memory":
            return 200, file_reply("calc.py", "x = bytearray(64 << 30)\n" + FIX), {}
        return 200, completion(tool_calls=[{"name": "write_file", "args": {"path": "[" * 50_000}}]), {}
    return respond


def test_hostile_agent_cannot_change_the_rate_outlast_the_deadline_or_escape(tmp_path, ledger):
    agentic_set(tmp_path / "set")
    ts = load_task_set(tmp_path / "set")
    mark = uuid.uuid4().hex
    timeout = 4.0
    attempts = len(AGENT_KINDS) + len(RIGHT)
    opts = RunOptions(endpoint="", model="m", attempts=attempts, concurrency=6, timeout_s=timeout,
                      max_retries=0, backoff_s=0.01, max_turns=3)
    rates, sent = {}, set()
    with peak_rss_growth() as rss:
        for hostile in (False, True):
            with ScriptedServer(agentic_respond(hostile, mark, ts.root / "repo")) as srv:
                opts.endpoint = srv.url
                run_id = run_eval(ledger, ts, opts, run_id=f"agentic-hostile={hostile}")
                log = {e["attempt"]: e["action"] for e in srv.log if "#" not in e["attempt"]}
                sent |= set(log.values())
            report = build_report(ledger, run_id)
            rates[hostile] = report["success_rate"]
            for row in ledger.attempts(run_id):
                action = log[f"{row.task_id}/{row.sample}/{row.try_}"]
                assert row.outcome == ("pass" if action == "right" else "fail"), (action, row.detail)
                assert row.seconds <= timeout + 5, (action, row.seconds)
                if action == "wrong:rewrite_test":
                    assert sorted(row.detail["tampered"]) == ["test_calc.py", "test_hidden.py"]
                if action == "wrong:endless_output":
                    assert row.detail["test"]["truncated_bytes"] > 0
                if action == "wrong:symlink_read":
                    read = [s for s in ledger.steps(row.attempt_id) if s.get("name") == "read_file"]
                    assert read and not read[0]["ok"] and "symlink" in read[0]["result"]
    assert sent >= {"wrong:" + k for k in AGENT_KINDS}, "every hostile kind was sent"
    assert rates[True] == rates[False] == pytest.approx(len(RIGHT) / attempts)
    # no process survives, nothing was written outside the workspaces, the task set is untouched
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            assert mark.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes(), "a daemon survived"
        except OSError:
            pass
    for path in (Path("/tmp") / f"archprobe-{mark}", Path("/root") / f"archprobe-{mark}",
                 Path("/dev/shm") / f"archprobe-{mark}", tmp_path / f"archprobe-{mark}.py"):
        assert not path.exists(), path
    assert sorted(p.name for p in (ts.root / "repo").iterdir()) == ["calc.py", "pkg", "test_calc.py"]
    assert load_task_set(tmp_path / "set").hash == ts.hash
    assert not [p for p in Path(os.environ.get("TMPDIR", "/tmp")).glob("archprobe-attempt-*")
                if p.stat().st_mtime > ledger.run(run_id)["created_at"] - 1], "workspaces are removed"
    assert rss.bytes < 450 << 20, f"the harness grew by {rss.bytes >> 20} MB"


def test_an_endpoint_that_trickles_or_stalls_cannot_hold_an_attempt_past_its_deadline(tmp_path, ledger):
    import time

    chat_set(tmp_path / "set")
    ts = load_task_set(tmp_path / "set")

    def trickle(key, body, entry):
        def slowly():
            for _ in range(120):
                time.sleep(0.25)
                yield b" "
        return 200, slowly(), {}

    with ScriptedServer(trickle) as srv:
        start = time.perf_counter()
        run_id = run_eval(ledger, ts, RunOptions(endpoint=srv.url, model="m", attempts=2, concurrency=6,
                                                 timeout_s=1.5, max_retries=0), run_id="trickle")
        took = time.perf_counter() - start
    rows = ledger.attempts(run_id)
    assert {r.outcome for r in rows} == {"timeout"} and all(r.detail["fault"] == "endpoint" for r in rows)
    assert all(r.seconds <= 1.5 + 5 for r in rows) and took < 1.5 + 5
    report = build_report(ledger, run_id)
    assert report["success_rate"] is None and report["success_rate_errors_as_failures"] == 0
    assert report["denominators"] == {"scored": 0, "settled": 6, "unscored_errors": 0, "unscored_timeouts": 6}


@pytest.mark.skipif(sys.platform != "linux", reason="symlink refusal is tested where symlinks are cheap")
def test_a_starting_repo_with_a_symlink_out_is_refused_at_load(tmp_path):
    from archprobe.eval.tasks import TaskSetError

    agentic_set(tmp_path / "set")
    os.symlink("/etc/hostname", tmp_path / "set" / "repo" / "secret.txt")
    with pytest.raises(TaskSetError, match="leaves the starting repository"):
        load_task_set(tmp_path / "set")
    (tmp_path / "set" / "repo" / "secret.txt").unlink()
    os.symlink("calc.py", tmp_path / "set" / "repo" / "alias.py")      # a link inside the repo is fine
    assert load_task_set(tmp_path / "set").tasks[0].repo_hash
    os.mkfifo(tmp_path / "set" / "repo" / "pipe")
    with pytest.raises(TaskSetError, match="FIFO"):
        load_task_set(tmp_path / "set")
