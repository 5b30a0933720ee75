"""A hostile ledger or export through the real `eval verify` / `eval report` (child process): a row at
seq 10**12, an exact copy of a chained row, an export with every row repeated, forged or missing heads,
rows in another order. Every tamper is found (exit 1), quickly and in bounded memory; nothing the
command checks is changed by checking it."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3

import pytest

from archprobe.eval.ledger import Ledger
from archprobe.eval.runner import RunOptions, run_eval
from archprobe.eval.standin import Behaviour, StandinServer
from archprobe.eval.tasks import load_task_set
from tests.support.cli import assert_bounded, run_cli
from tests.support.eval_sets import by_hand

FOUND = (1,)   # verify's status when it found a break


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    path = tmp_path_factory.mktemp("ledger") / "l.sqlite"
    book = Ledger(path)
    builtin = load_task_set("builtin")
    with StandinServer(builtin, Behaviour(seed=3, p_correct=0.5)) as srv:
        run_eval(book, builtin, RunOptions(endpoint=srv.url, model="m", attempts=1, timeout_s=20, max_retries=0),
                 run_id="r1")
    doc = book.export_run("r1")
    book.close()
    return path, doc


def copy(pristine, tmp_path):
    target = tmp_path / "l.sqlite"
    shutil.copy(pristine[0], target)
    return target


def verify(path, *extra):
    return run_cli("eval", "verify", str(path), "--json", *extra)


def problems(r) -> list[str]:
    return [b["problem"] for run in json.loads(r.stdout)["runs"] for b in run["breaks"]]


def test_the_untouched_ledger_and_export_verify(pristine, tmp_path):
    assert_bounded(verify(copy(pristine, tmp_path)), ok=True)
    (tmp_path / "e.json").write_text(json.dumps(pristine[1]))
    assert_bounded(verify(tmp_path / "e.json"), ok=True)


def test_a_row_at_seq_10_12_is_one_gap_not_a_walk(pristine, tmp_path):
    path = copy(pristine, tmp_path)
    by_hand(path, "INSERT INTO events (run_id, at, kind, detail, seq, prev_hash, row_hash) "
                  "VALUES ('r1', 0, 'x', '{}', 1000000000000, 'sha256:0', 'sha256:0')")
    for args in (("eval", "verify", str(path), "--json"), ("eval", "report", "r1", "--ledger", str(path), "--json")):
        r = run_cli(*args)
        assert_bounded(r, statuses=(0, 1), wall_s=20)
    r = verify(path)
    assert r.rc == 1
    gap = [b for run in json.loads(r.stdout)["runs"] for b in run["breaks"] if "missing" in b["problem"]]
    assert len(gap) == 1 and gap[0]["seq"][1] == 10**12 - 1


def test_a_head_at_seq_10_12_is_one_range(pristine, tmp_path):
    path = copy(pristine, tmp_path)
    by_hand(path, "UPDATE chain_heads SET seq = 1000000000000")
    r = verify(path)
    assert_bounded(r, statuses=FOUND, wall_s=20)
    assert any("past its last row" in p for p in problems(r))


def test_an_exact_copy_of_a_chained_row_is_inserted(pristine, tmp_path):
    path = copy(pristine, tmp_path)
    by_hand(path, "INSERT INTO events (run_id, at, kind, detail, seq, prev_hash, row_hash) "
                  "SELECT run_id, at, kind, detail, seq, prev_hash, row_hash FROM events ORDER BY id LIMIT 1")
    r = verify(path)
    assert_bounded(r, statuses=FOUND)
    assert problems(r) == ["a second row at this place in the chain (inserted, a copy of the row there)"]


def export_with(pristine, tmp_path, change) -> str:
    doc = json.loads(json.dumps(pristine[1]))
    change(doc)
    (tmp_path / "e.json").write_text(json.dumps(doc))
    return str(tmp_path / "e.json")


@pytest.mark.parametrize("change, expect", [
    (lambda d: d.__setitem__("rows", d["rows"] * 2), "a copy of the row there"),
    (lambda d: d["rows"].append(d["rows"][3]), "a copy of the row there"),
    (lambda d: d["head"].__setitem__("seq", 10**15), "past its last row"),
    (lambda d: d["head"].__setitem__("seq", -10**15), "malformed"),
    (lambda d: d["head"].__setitem__("seq", True), "malformed"),
    (lambda d: d["head"].__setitem__("hash", "sha256:" + "0" * 64), "differs from the chain's recorded head"),
    (lambda d: d.pop("head"), "no recorded head"),
    (lambda d: d["rows"].pop(5), "missing"),
    (lambda d: d["rows"][5]["values"].__setitem__("seq", "5"), "not in the chain"),
    (lambda d: d["rows"][5]["values"].__setitem__("seq", 10**12), "missing"),
    (lambda d: d["rows"][-1]["values"].__setitem__("seq", 10**12), "after the chain's recorded head"),
])
def test_a_tampered_export_is_found(pristine, tmp_path, change, expect):
    r = verify(export_with(pristine, tmp_path, change))
    assert_bounded(r, statuses=FOUND, wall_s=20)
    assert any(expect in p for p in problems(r)), problems(r)


def test_an_export_in_another_row_order_still_verifies(pristine, tmp_path):
    r = verify(export_with(pristine, tmp_path, lambda d: d["rows"].reverse()))
    assert_bounded(r, ok=True)


@pytest.mark.parametrize("rows", [[1], [{"table": 1, "key": "k", "values": {}}], [{"table": "t", "key": "k",
                                                                                 "values": []}]])
def test_a_malformed_export_row_is_one_line(pristine, tmp_path, rows):
    r = verify(export_with(pristine, tmp_path, lambda d: d.__setitem__("rows", rows)))
    assert_bounded(r, ok=False)


def test_verify_and_report_change_nothing_in_the_ledger(pristine, tmp_path):
    path = copy(pristine, tmp_path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=DELETE")
    db.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    assert_bounded(verify(path), ok=True)
    assert_bounded(run_cli("eval", "report", "r1", "--ledger", str(path), "--json"), ok=True)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.sqlite"], "no -wal / -shm / journal left beside it"


def _read_only_mount_works(tmp_path) -> bool:
    import subprocess

    (tmp_path / "probe").mkdir()
    r = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind -o ro {tmp_path}/probe {tmp_path}/probe"],
                       capture_output=True)
    return r.returncode == 0


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_a_ledger_on_a_read_only_mount_verifies_and_reports(pristine, tmp_path, journal):
    """The mount is made read-only in a private mount namespace (root in a container can still write a
    0444 file, so chmod would prove nothing)."""
    if shutil.which("unshare") is None or not _read_only_mount_works(tmp_path):
        pytest.skip("needs `unshare -m` and bind mounts to make a read-only mount")
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "l.sqlite"
    shutil.copy(pristine[0], path)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA journal_mode={journal}")
    db.close()
    wrap = ("unshare", "-m", "sh", "-c", f'mount --bind -o ro {folder} {folder} && exec "$@"', "-")
    for args in (("eval", "verify", str(path), "--json"), ("eval", "report", "r1", "--ledger", str(path), "--json")):
        assert_bounded(run_cli(*args, wrap=wrap), ok=True)
    r = run_cli("eval", "export", "r1", "--ledger", str(path), wrap=wrap)   # its rows quote tasks' tracebacks
    assert r.rc == 0 and not r.stderr and json.loads(r.stdout)["run_id"] == "r1", r.stderr[-500:]


@pytest.mark.parametrize("edit", [
    "UPDATE outcomes SET detail = '{{' WHERE rowid = 1",
    "UPDATE outcomes SET detail = '[1]' WHERE rowid = 1",
    "UPDATE runs SET params = 'null'",
    "UPDATE outcomes SET seconds = 'abc' WHERE rowid = 1",
    "UPDATE outcomes SET cost_usd = 'abc' WHERE rowid = 1",
    "UPDATE attempts SET sample = 'x' WHERE rowid = 1",
    "UPDATE runs SET attempts_per_task = 1000000000000",
])
def test_a_hand_edited_row_is_one_line_in_report_and_found_by_verify(pristine, tmp_path, edit):
    path = copy(pristine, tmp_path)
    by_hand(path, edit)
    assert_bounded(run_cli("eval", "report", "r1", "--ledger", str(path), "--json"), wall_s=20)
    assert_bounded(verify(path), statuses=FOUND, wall_s=20)


def test_verify_of_a_run_that_is_not_there_is_one_line(pristine, tmp_path):
    assert_bounded(verify(copy(pristine, tmp_path), "--run-id", "nope"), ok=False, contains="no run")


@pytest.mark.parametrize("change", [
    lambda d: d.__setitem__("rows", d["rows"] * 2),
    lambda d: d["rows"][3]["values"].__setitem__("seconds", 10**30),
    lambda d: d["rows"][3]["values"].__setitem__("seconds", [1]),
    lambda d: d["rows"][0]["values"].__setitem__("attempts_per_task", 10**12),
    lambda d: d["head"].__setitem__("seq", 10**15),
], ids=["rows-repeated", "huge-int", "list-value", "attempts-10^12", "head-10^15"])
def test_audit_of_a_tampered_export_is_bounded(pristine, tmp_path, change):
    r = run_cli("eval", "audit", export_with(pristine, tmp_path, change), "--json")
    assert_bounded(r, wall_s=20)
    if r.rc == 0:
        assert json.loads(r.stdout)["chain_ok"] is False
