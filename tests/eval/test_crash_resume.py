"""SIGKILL at a random point, resume with the same --run-id: nothing duplicated, nothing lost."""

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from archprobe.eval.ledger import Ledger
from archprobe.eval.report import build_report
from archprobe.eval.standin import Behaviour, StandinServer
from archprobe.eval.tasks import load_task_set
from tests.support.eval_sets import ACTION_TO_OUTCOME, server_actions

TASKS, ATTEMPTS = 40, 5


def outcomes_so_far(path) -> int:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        n = db.execute("SELECT count(*) FROM outcomes").fetchone()[0]
        db.close()
        return n
    except sqlite3.Error:
        return 0


def cli(*args):
    return [sys.executable, "-m", "archprobe.cli.main", "eval", *args]


@pytest.mark.parametrize("kill_seed", [1, 2])
def test_sigkill_then_resume_settles_every_slot_exactly_once(tmp_path, kill_seed):
    (tmp_path / "set").mkdir()
    with open(tmp_path / "set" / "tasks.jsonl", "w") as f:
        for i in range(TASKS):
            f.write(json.dumps({"id": f"add-{i}", "prompt": f"What is {i} + {i}?", "target": str(2 * i)}) + "\n")
    ts = load_task_set(tmp_path / "set")
    ledger_path = tmp_path / "ledger.sqlite"
    behaviour = Behaviour(seed=kill_seed, p_correct=0.6, p_error=0.05, p_rate_limit=0.05, delay_s=0.03)
    args = ["run", str(tmp_path / "set"), "--model", "m", "--attempts", str(ATTEMPTS), "--concurrency", "8",
            "--ledger", str(ledger_path), "--run-id", "crashy", "--timeout", "5", "--backoff", "0.01",
            "--no-progress", "--json"]
    with StandinServer(ts, behaviour) as srv:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(cli(*args, "--endpoint", srv.url), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=env)
        kill_at = random.Random(kill_seed).randint(10, 150)
        deadline = time.time() + 60
        while outcomes_so_far(ledger_path) < kill_at and proc.poll() is None and time.time() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, "the run finished before it could be killed: " + proc.stderr.read().decode()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_with = outcomes_so_far(ledger_path)
        assert 0 < killed_with < TASKS * ATTEMPTS

        resumed = subprocess.run(cli(*args, "--endpoint", srv.url), capture_output=True, env=env, timeout=120)
        assert resumed.returncode == 0, resumed.stderr.decode()
        actions = server_actions(srv)   # asserts no attempt key reached the server twice

    book = Ledger(ledger_path)
    rows = book.attempts("crashy")
    ids = [r.attempt_id for r in rows]
    assert len(ids) == len(set(ids))
    assert all(r.outcome is not None for r in rows)
    finals = {}
    for r in rows:
        finals.setdefault((r.task_id, r.sample), []).append(r)
    assert len(finals) == TASKS * ATTEMPTS
    for chain in finals.values():
        last = max(chain, key=lambda a: a.try_)
        assert last.outcome in ("pass", "fail", "error", "timeout")
        assert sum(a.outcome in ("pass", "fail") for a in chain) <= 1
    # every request the server answered is in the ledger (the row is written before the request) ...
    by_key = {f"{r.task_id}/{r.sample}/{r.try_}": r for r in rows}
    assert set(actions) <= set(by_key)
    # ... and every recorded outcome is what the server did; only interrupted attempts are `cancelled`
    for key, r in by_key.items():
        if r.outcome == "cancelled":
            assert r.detail["reason"].startswith("interrupted")
        else:
            assert r.outcome == ACTION_TO_OUTCOME[actions[key]], key
    # the kill caught attempts in flight (8 at a time, 30 ms each): the interrupted path really ran
    assert any(r.outcome == "cancelled" for r in rows)
    report = build_report(book, "crashy")
    assert report["unsettled_slots"] == 0
    assert sum(t["scored"] for t in report["per_task"]) + sum(
        1 for c in finals.values() if max(c, key=lambda a: a.try_).outcome in ("error", "timeout")) == 200
    assert report["outcomes"]["pass"] == sum(1 for a in actions.values() if a == "correct") - sum(
        1 for k, r in by_key.items() if r.outcome == "cancelled" and actions.get(k) == "correct")
