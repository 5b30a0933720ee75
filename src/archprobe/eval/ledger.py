"""The evaluation ledger: one SQLite file, numbered migrations, append-only outcomes.

Why SQLite in WAL mode with a commit per event: an attempt that the ledger acknowledged (committed)
survives a SIGKILL of the process at any moment, and a resume can see exactly which attempts have
no outcome. Outcomes, attempts and interventions are never updated or deleted (triggers refuse it):
a retry is a new attempt row that points at the one it retries.
"""

from __future__ import annotations

import getpass
import json
import socket
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from archprobe.errors import ArchprobeError

OUTCOMES = ("pass", "fail", "error", "timeout", "cancelled")
INTERVENTION_KINDS = ("message", "approval", "fix")

MIGRATIONS: list[str] = [
    # 1: the core tables
    """
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, created_at REAL NOT NULL, source TEXT NOT NULL,
        task_set_hash TEXT NOT NULL, task_set_path TEXT, model TEXT NOT NULL, endpoint TEXT NOT NULL,
        attempts_per_task INTEGER NOT NULL, params TEXT NOT NULL, host TEXT NOT NULL, operator TEXT NOT NULL,
        interventions_tracked INTEGER NOT NULL);
    CREATE TABLE tasks (
        run_id TEXT NOT NULL REFERENCES runs, task_id TEXT NOT NULL, position INTEGER NOT NULL,
        content TEXT NOT NULL, PRIMARY KEY (run_id, task_id));
    CREATE TABLE attempts (
        attempt_id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs, task_id TEXT NOT NULL,
        sample INTEGER NOT NULL, try INTEGER NOT NULL, retry_of TEXT REFERENCES attempts,
        started_at REAL NOT NULL, request TEXT NOT NULL);
    CREATE INDEX attempts_by_run ON attempts (run_id, task_id, sample, try);
    CREATE TABLE outcomes (
        attempt_id TEXT PRIMARY KEY REFERENCES attempts,
        outcome TEXT NOT NULL CHECK (outcome IN ('pass','fail','error','timeout','cancelled')),
        seconds REAL, tokens_in INTEGER, tokens_out INTEGER, server_model TEXT, answer TEXT,
        detail TEXT NOT NULL, recorded_at REAL NOT NULL);
    CREATE TABLE interventions (
        id INTEGER PRIMARY KEY AUTOINCREMENT, attempt_id TEXT NOT NULL REFERENCES attempts,
        kind TEXT NOT NULL CHECK (kind IN ('message','approval','fix')), note TEXT NOT NULL,
        operator TEXT NOT NULL, recorded_at REAL NOT NULL);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL,
        detail TEXT NOT NULL);
    """,
    # 2: nothing recorded is ever rewritten
    "".join(f"""
    CREATE TRIGGER {table}_no_{op} BEFORE {op.upper()} ON {table}
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: {table} rows are never {op}d'); END;
    """ for table in ("outcomes", "attempts", "interventions", "runs") for op in ("update", "delete")),
    # 3: `archprobe track` snapshots, reach and usage kept apart by a column that cannot be mixed up
    """
    CREATE TABLE signals (
        id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('reach','usage')), subject TEXT NOT NULL, source TEXT NOT NULL,
        metric TEXT NOT NULL, value REAL NOT NULL, labels TEXT NOT NULL);
    CREATE INDEX signals_by_subject ON signals (subject, kind, metric, at);
    CREATE TRIGGER signals_no_update BEFORE UPDATE ON signals
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: signals rows are never updated'); END;
    CREATE TRIGGER signals_no_delete BEFORE DELETE ON signals
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: signals rows are never deleted'); END;
    """,
]


class LedgerError(ArchprobeError):
    """The ledger file cannot be used, or a run / attempt in it does not exist."""


@dataclass(frozen=True)
class AttemptRow:
    attempt_id: str
    task_id: str
    sample: int
    try_: int
    retry_of: str | None
    outcome: str | None
    seconds: float | None
    tokens_in: int | None
    tokens_out: int | None
    server_model: str | None
    answer: str | None
    detail: dict


def whoami() -> tuple[str, str]:
    """(host, operator): who ran it, for the independent re-run check (C1)."""
    import os

    host = os.environ.get("ARCHPROBE_HOST") or socket.gethostname()
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = "unknown"
    return host, os.environ.get("ARCHPROBE_OPERATOR") or user


class Ledger:
    @classmethod
    def existing(cls, path: str | Path) -> Ledger:
        """For commands that read: a missing file is a user mistake, not a new empty ledger."""
        if not Path(path).is_file():
            raise LedgerError(f"{path}: no ledger here", hint="pass --ledger PATH (default ./archprobe-ledger.sqlite)")
        return cls(path)

    def __init__(self, path: str | Path, durable: bool = False):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_file():
            raise LedgerError(f"{self.path}: not a file")
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode loses nothing on a process crash (SIGKILL); FULL also survives power loss.
            self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self.db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{self.path}: not a usable SQLite ledger ({exc})") from None

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise LedgerError(f"{self.path}: written by a newer archprobe (schema {version} > {len(MIGRATIONS)})",
                              hint="upgrade archprobe to read it")
        for number in range(version, len(MIGRATIONS)):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                for statement in _statements(MIGRATIONS[number]):
                    self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version={number + 1}")
                self.db.execute("COMMIT")
            except Exception:
                self.db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        self.db.close()

    # -- runs ---------------------------------------------------------------------------------
    def create_run(self, run_id: str, *, source: str, task_set_hash: str, task_set_path: str, model: str,
                   endpoint: str, attempts_per_task: int, params: dict, tasks: list[tuple[str, dict]],
                   interventions_tracked: bool = True, host: str | None = None, operator: str | None = None) -> None:
        me_host, me_op = whoami()
        with self.transaction():
            self.db.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                            (run_id, time.time(), source, task_set_hash, task_set_path, model, endpoint,
                             attempts_per_task, json.dumps(params), host or me_host, operator or me_op,
                             int(interventions_tracked)))
            self.db.executemany("INSERT INTO tasks VALUES (?,?,?,?)",
                                [(run_id, tid, n, json.dumps(content)) for n, (tid, content) in enumerate(tasks)])
            self._event(run_id, "run_created", {"attempts_per_task": attempts_per_task})

    def run(self, run_id: str) -> dict:
        row = self.db.execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if row is None:
            known = [r[0] for r in self.db.execute("SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 5")]
            raise LedgerError(f"{self.path}: no run {run_id!r}",
                              hint=("recent runs: " + ", ".join(known)) if known else "the ledger has no runs yet")
        names = [d[0] for d in self.db.execute("SELECT * FROM runs LIMIT 0").description]
        doc = dict(zip(names, row, strict=True))
        doc["params"] = json.loads(doc["params"])
        doc["interventions_tracked"] = bool(doc["interventions_tracked"])
        return doc

    def has_run(self, run_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone() is not None

    def runs(self) -> list[dict]:
        return [self.run(r[0]) for r in self.db.execute("SELECT run_id FROM runs ORDER BY created_at")]

    def task_contents(self, run_id: str) -> dict[str, dict]:
        rows = self.db.execute("SELECT task_id, content FROM tasks WHERE run_id=? ORDER BY position", (run_id,))
        return {tid: json.loads(content) for tid, content in rows}

    def task_ids(self, run_id: str) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT task_id FROM tasks WHERE run_id=? ORDER BY position",
                                              (run_id,))]

    # -- attempts -----------------------------------------------------------------------------
    def start_attempt(self, run_id: str, attempt_id: str, task_id: str, sample: int, try_: int,
                      retry_of: str | None, request: dict) -> None:
        with self.transaction():
            self.db.execute("INSERT INTO attempts VALUES (?,?,?,?,?,?,?,?)",
                            (attempt_id, run_id, task_id, sample, try_, retry_of, time.time(), json.dumps(request)))

    def record_outcome(self, attempt_id: str, outcome: str, *, seconds: float | None = None,
                       tokens_in: int | None = None, tokens_out: int | None = None, server_model: str | None = None,
                       answer: str | None = None, detail: dict | None = None) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(outcome)
        with self.transaction():
            self.db.execute("INSERT INTO outcomes VALUES (?,?,?,?,?,?,?,?,?)",
                            (attempt_id, outcome, seconds, tokens_in, tokens_out, server_model, answer,
                             json.dumps(detail or {}), time.time()))

    def attempts(self, run_id: str) -> list[AttemptRow]:
        rows = self.db.execute(
            "SELECT a.attempt_id, a.task_id, a.sample, a.try, a.retry_of, o.outcome, o.seconds, o.tokens_in, "
            "o.tokens_out, o.server_model, o.answer, o.detail FROM attempts a LEFT JOIN outcomes o "
            "USING (attempt_id) WHERE a.run_id=? ORDER BY a.rowid", (run_id,))
        return [AttemptRow(*r[:11], json.loads(r[11]) if r[11] else {}) for r in rows]

    def attempt_run(self, attempt_id: str) -> str:
        row = self.db.execute("SELECT run_id FROM attempts WHERE attempt_id=?", (attempt_id,)).fetchone()
        if row is None:
            raise LedgerError(f"{self.path}: no attempt {attempt_id!r}",
                              hint="`archprobe eval report RUN_ID` lists the attempt ids")
        return row[0]

    # -- interventions and events -------------------------------------------------------------
    def add_intervention(self, attempt_id: str, kind: str, note: str) -> None:
        if kind not in INTERVENTION_KINDS:
            raise LedgerError(f"unknown intervention kind {kind!r}", hint="one of " + ", ".join(INTERVENTION_KINDS))
        run_id = self.attempt_run(attempt_id)
        with self.transaction():
            self.db.execute("INSERT INTO interventions (attempt_id, kind, note, operator, recorded_at) "
                            "VALUES (?,?,?,?,?)", (attempt_id, kind, note, whoami()[1], time.time()))
            self._event(run_id, "intervention", {"attempt_id": attempt_id, "kind": kind})

    def interventions(self, run_id: str) -> list[dict]:
        rows = self.db.execute("SELECT i.attempt_id, i.kind, i.note, i.operator, i.recorded_at FROM interventions i "
                               "JOIN attempts a USING (attempt_id) WHERE a.run_id=? ORDER BY i.id", (run_id,))
        return [dict(zip(("attempt_id", "kind", "note", "operator", "recorded_at"), r, strict=True)) for r in rows]

    def event(self, run_id: str, kind: str, detail: dict) -> None:
        with self.transaction():
            self._event(run_id, kind, detail)

    def events(self, run_id: str) -> list[dict]:
        rows = self.db.execute("SELECT at, kind, detail FROM events WHERE run_id=? ORDER BY id", (run_id,))
        return [{"at": at, "kind": kind, "detail": json.loads(d)} for at, kind, d in rows]

    def _event(self, run_id: str, kind: str, detail: dict) -> None:
        self.db.execute("INSERT INTO events (run_id, at, kind, detail) VALUES (?,?,?,?)",
                        (run_id, time.time(), kind, json.dumps(detail)))

    def transaction(self):
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on an exception), as a context manager."""
        return _Transaction(self.db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, exc, tb):
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")
        return False


def _statements(script: str) -> list[str]:
    """Split a migration into statements; triggers keep their inner `;` (BEGIN ... END)."""
    out, buf = [], []
    for part in script.split(";"):
        buf.append(part)
        text = ";".join(buf).strip()
        if not text:
            buf = []
            continue
        if text.upper().startswith("CREATE TRIGGER") and not text.upper().endswith("END"):
            continue
        out.append(text)
        buf = []
    return out
