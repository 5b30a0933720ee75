"""Tamper evidence: a row edited, deleted or inserted by hand (triggers dropped first) is found and located."""

from __future__ import annotations

import json

import pytest

from archprobe.eval.audit import audit_claim
from archprobe.eval.ledger import Ledger, verify_export
from archprobe.eval.report import build_report
from archprobe.eval.runner import RunOptions, run_eval
from archprobe.eval.standin import Behaviour, StandinServer
from tests.support.cli import run as cli
from tests.support.eval_sets import by_hand


@pytest.fixture
def finished(tmp_path, builtin):
    path = tmp_path / "l.sqlite"
    book = Ledger(path)
    with StandinServer(builtin, Behaviour(seed=3, p_correct=0.5)) as srv:
        run_eval(book, builtin, RunOptions(endpoint=srv.url, model="standin-model", attempts=2, timeout_s=20,
                                           max_retries=0), run_id="r1")
        run_eval(book, builtin, RunOptions(endpoint=srv.url, model="standin-model", attempts=1, timeout_s=20,
                                           max_retries=0), run_id="r2")
    book.add_intervention(book.attempts("r1")[0].attempt_id, "message", "a hint")
    book.close()
    return path


def breaks(path, run_id="r1"):
    doc = Ledger(path).verify()
    assert [r["run_id"] for r in doc["runs"]] == ["r1", "r2"]
    other = next(r for r in doc["runs"] if r["run_id"] != run_id)
    assert other["ok"], "the other run's chain is untouched and still verifies"
    return next(r for r in doc["runs"] if r["run_id"] == run_id)["breaks"]


def test_an_untouched_ledger_verifies(finished):
    doc = Ledger(finished).verify()
    assert doc["ok"] and all(r["rows"] > 20 for r in doc["runs"])
    assert build_report(Ledger(finished), "r1")["chain"]["ok"]


def test_an_edited_outcome_is_located(finished):
    book = Ledger(finished)
    failed = next(a for a in book.attempts("r1") if a.outcome == "fail")
    by_hand(finished, f"UPDATE outcomes SET outcome='pass' WHERE attempt_id='{failed.attempt_id}'")
    found = breaks(finished)
    assert found == [{"seq": found[0]["seq"], "table": "outcomes", "key": f"outcomes:{failed.attempt_id}",
                      "problem": "content does not match the row's hash (edited)"}]
    report = build_report(Ledger(finished), "r1")
    assert not report["chain"]["ok"]
    assert audit_claim(report)["verdict"] == "methodological_lead"


def test_an_edit_with_a_recomputed_hash_breaks_the_next_link(finished):
    from archprobe.eval import chain

    book = Ledger(finished)
    rows = book.chain_rows("r1")
    victim = next(r for r in rows if r.table == "outcomes" and r.values["outcome"] == "fail")
    values = {**victim.values, "outcome": "pass"}
    forged = chain.row_hash(victim.prev_hash, "outcomes", values)
    aid = victim.values["attempt_id"]
    by_hand(finished, f"UPDATE outcomes SET outcome='pass', row_hash='{forged}' WHERE attempt_id='{aid}'")
    found = breaks(finished)
    assert len(found) == 1 and found[0]["seq"] == victim.seq + 1 and "does not link" in found[0]["problem"]


@pytest.mark.parametrize("where", ["middle", "last"])
def test_a_deleted_row_is_located(finished, where):
    book = Ledger(finished)
    rows = book.chain_rows("r1")
    victim = rows[len(rows) // 2] if where == "middle" else rows[-1]
    table, key = victim.table, victim.key.split(":", 1)[1]
    column = {"outcomes": "attempt_id", "attempts": "attempt_id", "events": "id", "interventions": "id",
              "tasks": "task_id", "steps": "attempt_id"}[table]
    by_hand(finished, "PRAGMA foreign_keys=OFF", f"DELETE FROM {table} WHERE {column}='{key}' AND seq={victim.seq}")
    found = breaks(finished)
    assert len(found) == 1 and "deleted" in found[0]["problem"]
    assert found[0]["seq"] == victim.seq or found[0]["seq"] == [victim.seq, victim.seq]


def test_an_inserted_row_is_located(finished):
    book = Ledger(finished)
    aid = book.attempts("r1")[0].attempt_id
    by_hand(finished, "INSERT INTO attempts (attempt_id, run_id, task_id, sample, try, started_at, request) "
                      "VALUES ('r1/forged/0/0', 'r1', 'mul-17-23', 0, 9, 0, '{}')",
            "INSERT INTO outcomes (attempt_id, outcome, detail, recorded_at) VALUES ('r1/forged/0/0', 'pass', "
            "'{}', 0)")
    found = breaks(finished)
    keys = {b["key"] for b in found}
    assert keys == {"attempts:r1/forged/0/0", "outcomes:r1/forged/0/0"}, found
    assert aid not in json.dumps(found)


def test_export_carries_the_chain_for_a_third_party(finished, tmp_path):
    book = Ledger(finished)
    doc = book.export_run("r1")
    assert verify_export(json.loads(json.dumps(doc)))["ok"]
    victim = next(r for r in doc["rows"] if r["table"] == "outcomes")
    victim["values"]["outcome"] = "pass" if victim["values"]["outcome"] != "pass" else "fail"
    out = verify_export(doc)
    assert not out["ok"] and out["runs"][0]["breaks"][0]["key"] == victim["key"]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))
    r = cli("eval", "verify", str(path))
    assert r.returncode == 1 and victim["key"] in r.stdout and "edited" in r.stdout


def test_verify_cli(finished):
    r = cli("eval", "verify", str(finished), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"]
    book = Ledger(finished)
    aid = book.attempts("r2")[0].attempt_id
    by_hand(finished, f"UPDATE attempts SET task_id='other' WHERE attempt_id='{aid}'")
    r = cli("eval", "verify", str(finished))
    assert r.returncode == 1 and f"attempts:{aid}" in r.stdout and "run r1: " in r.stdout
    r = cli("eval", "export", "r2", "--ledger", str(finished), "-o", str(finished.parent / "x.json"))
    assert r.returncode == 0, r.stderr


def test_a_row_appended_by_hand_with_a_valid_hash_is_past_the_recorded_head(finished):
    from archprobe.eval import chain

    book = Ledger(finished)
    rows = book.chain_rows("r1")
    last = rows[-1]
    values = {"run_id": "r1", "at": 0.0, "kind": "forged", "detail": "{}", "seq": last.seq + 1}
    digest = chain.row_hash(last.row_hash, "events", values)
    by_hand(finished, f"INSERT INTO events (run_id, at, kind, detail, seq, prev_hash, row_hash) VALUES "
                      f"('r1', 0.0, 'forged', '{{}}', {last.seq + 1}, '{last.row_hash}', '{digest}')")
    found = breaks(finished)
    assert len(found) == 1 and "appended by hand" in found[0]["problem"] and found[0]["seq"] == last.seq + 1


def test_an_exported_run_is_audited_with_its_chain(finished, tmp_path):
    from archprobe.eval.audit import audit_file

    doc = Ledger(finished).export_run("r1")
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))
    good = audit_file(path)
    assert good["chain_ok"] and not good["chain_breaks"]
    assert good["checks"]["E1"]["status"] == "met" and good["checks"]["T1"]["status"] == "met"
    victim = next(r for r in doc["rows"] if r["table"] == "outcomes")
    victim["values"]["outcome"] = "pass" if victim["values"]["outcome"] != "pass" else "fail"
    path.write_text(json.dumps(doc))
    bad = audit_file(path)
    assert bad["verdict"] == "methodological_lead" and not bad["chain_ok"]
    assert bad["chain_breaks"][0]["key"] == victim["key"]
