import sqlite3

import pytest

from archprobe.eval.ledger import MIGRATIONS, Ledger, LedgerError


def make_run(book, run_id="r"):
    book.create_run(run_id, source="archprobe", task_set_hash="sha256:x", task_set_path="t", model="m",
                    endpoint="e", attempts_per_task=1, params={}, tasks=[("t1", {"id": "t1"})])


def test_fresh_ledger_is_wal_and_at_the_latest_schema(tmp_path):
    book = Ledger(tmp_path / "l.sqlite")
    assert book.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert book.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def test_outcomes_and_attempts_are_append_only(ledger):
    make_run(ledger)
    ledger.start_attempt("r", "r/t1/0/0", "t1", 0, 0, None, {})
    ledger.record_outcome("r/t1/0/0", "fail")
    for sql in ("UPDATE outcomes SET outcome='pass'", "DELETE FROM outcomes", "UPDATE attempts SET try=3",
                "DELETE FROM attempts"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            ledger.db.execute(sql)
    with pytest.raises(sqlite3.IntegrityError):   # a second outcome for the same attempt
        ledger.record_outcome("r/t1/0/0", "pass")
    assert [a.outcome for a in ledger.attempts("r")] == ["fail"]


def test_migrating_an_old_ledger_keeps_its_rows(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[0](db)
    db.execute("PRAGMA user_version=1")
    db.execute("INSERT INTO runs VALUES ('old', 0, 'archprobe', 'h', 't', 'm', 'e', 1, '{}', 'h', 'o', 1)")
    db.close()
    book = Ledger(path)
    assert book.run("old")["model"] == "m"
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        book.db.execute("DELETE FROM runs")
    # a row written before the chain existed is reported as outside it, not silently trusted
    report = book.verify("old")
    assert not report["ok"] and "not in the chain" in report["runs"][0]["breaks"][0]["problem"]


def test_newer_or_foreign_files_are_refused(tmp_path):
    newer = tmp_path / "newer.sqlite"
    db = sqlite3.connect(newer)
    db.execute(f"PRAGMA user_version={len(MIGRATIONS) + 5}")
    db.close()
    with pytest.raises(LedgerError, match="newer archprobe"):
        Ledger(newer)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(LedgerError, match="not a usable SQLite ledger"):
        Ledger(junk)


def test_unknown_run_and_attempt_are_clear_errors(ledger):
    make_run(ledger)
    with pytest.raises(LedgerError, match="no run 'nope'.*"):
        ledger.run("nope")
    with pytest.raises(LedgerError, match="no attempt"):
        ledger.add_intervention("r/t1/9/9", "fix", "x")
    with pytest.raises(LedgerError, match="unknown intervention kind"):
        ledger.add_intervention("r/t1/9/9", "bribe", "x")
