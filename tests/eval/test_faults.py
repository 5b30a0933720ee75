"""One writer per run id, several runs per ledger, and a full or read-only disk: one line, nothing lost."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from archprobe.eval.ledger import Ledger, LedgerError
from archprobe.eval.report import build_report
from archprobe.eval.runner import RunOptions, run_eval
from archprobe.eval.standin import Behaviour, StandinServer

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
needs_mount_ns = pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0 or not shutil.which("unshare")
    or subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0,
    reason="needs root and mount namespaces to make a real full / read-only file system")


def cli(*args) -> list[str]:
    return [sys.executable, "-m", "archprobe.cli.main", "eval", *args]


def run_args(server, ledger, run_id, attempts=2):
    return ["run", "builtin", "--endpoint", server.url, "--model", "standin-model", "--attempts", str(attempts),
            "--ledger", str(ledger), "--run-id", run_id, "--backoff", "0.01", "--no-progress", "--json",
            "--max-retries", "0"]


def settled(path, run_id) -> dict:
    book = Ledger(path)
    report = build_report(book, run_id)
    assert report["unsettled_slots"] == 0 and book.verify(run_id)["ok"]
    return report


def test_a_second_writer_on_one_run_id_is_a_one_line_error_and_other_runs_proceed(tmp_path, builtin):
    import threading

    from tests.support.scripted import ScriptedServer, completion

    ledger = tmp_path / "l.sqlite"
    gate = threading.Event()          # the first run's requests wait here, so it is surely mid-run

    def respond(key, body, entry):
        gate.wait(60)
        return 200, completion("not sure"), {}

    with ScriptedServer(respond) as srv:
        first = subprocess.Popen(cli(*run_args(srv, ledger, "one", attempts=3)), env=ENV, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while time.time() < deadline and not srv.log:
            time.sleep(0.05)
        assert srv.log, "the first run never reached the server"
        second = subprocess.run(cli(*run_args(srv, ledger, "one")), env=ENV, capture_output=True, text=True)
        gate.set()
        other = subprocess.run(cli(*run_args(srv, ledger, "two")), env=ENV, capture_output=True, text=True)
        out, err = first.communicate(timeout=120)
    assert second.returncode == 2 and second.stderr.startswith("error: run 'one' is being written by another")
    assert "Traceback" not in second.stderr and len(second.stderr.strip().splitlines()) <= 2
    assert first.returncode == 0, err
    assert other.returncode == 0, other.stderr
    assert settled(ledger, "one")["attempts_total"] == 36 and settled(ledger, "two")["attempts_total"] == 24
    assert Ledger(ledger).verify()["ok"]


def test_a_full_ledger_stops_cleanly_and_resumes(tmp_path, builtin):
    path = tmp_path / "l.sqlite"
    book = Ledger(path)
    opts = RunOptions(endpoint="", model="standin-model", attempts=3, concurrency=4, timeout_s=20, max_retries=0)
    with StandinServer(builtin, Behaviour(seed=2, p_correct=0.5)) as srv:
        opts.endpoint = srv.url
        pages = book.db.execute("PRAGMA page_count").fetchone()[0]
        book.db.execute(f"PRAGMA max_page_count={pages + 3}")   # SQLite's own "database or disk is full"
        with pytest.raises(LedgerError, match="disk full"):
            run_eval(book, builtin, opts, run_id="full")
        committed = {a.attempt_id: a.outcome for a in Ledger(path).attempts("full")}
        book.db.execute("PRAGMA max_page_count=1073741823")
        run_eval(book, builtin, opts, run_id="full")
    after = {a.attempt_id: a.outcome for a in book.attempts("full")}
    assert all(after[k] == v or v is None for k, v in committed.items()), "nothing committed was lost or changed"
    assert settled(path, "full")["unsettled_slots"] == 0


@needs_mount_ns
def test_disk_full_and_read_only_from_the_cli_are_one_line_and_resume_works(tmp_path, builtin):
    small = tmp_path / "small"
    small.mkdir()
    with StandinServer(builtin, Behaviour(seed=4, p_correct=0.5)) as srv:
        args = " ".join(shlex.quote(a) for a in cli(*run_args(srv, small / "l.sqlite", "d", attempts=40)))
        script = (f"mount -t tmpfs -o size=160k tmpfs {small} && {args}; code=$?; "
                  f"cp {small}/l.sqlite* {tmp_path}/ 2>/dev/null; exit $code")
        full = subprocess.run(["unshare", "--mount", "sh", "-c", script], env=ENV, capture_output=True, text=True,
                              timeout=300)
        assert full.returncode == 2, full.stdout[-500:] + full.stderr
        assert full.stderr.startswith("error: ") and "disk full" in full.stderr and "Traceback" not in full.stderr

        ro = tmp_path / "ro"
        ro.mkdir()
        ok = subprocess.run(cli(*run_args(srv, ro / "l.sqlite", "r", attempts=1)), env=ENV, capture_output=True)
        assert ok.returncode == 0
        args = " ".join(shlex.quote(a) for a in cli(*run_args(srv, ro / "l.sqlite", "r2", attempts=1)))
        script = f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && {args}"
        refused = subprocess.run(["unshare", "--mount", "sh", "-c", script], env=ENV, capture_output=True,
                                 text=True, timeout=120)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.startswith("error: ") and "read-only" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
        # after the fault, the same command on a writable disk resumes and settles everything
        resumed = subprocess.run(cli(*run_args(srv, ro / "l.sqlite", "r2", attempts=1)), env=ENV,
                                 capture_output=True, text=True)
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["unsettled_slots"] == 0
    assert settled(ro / "l.sqlite", "r")["attempts_total"] == 12
