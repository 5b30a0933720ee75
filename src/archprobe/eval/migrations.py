"""The ledger's schema as numbered migration functions, applied in order and never edited afterwards.

Why functions, one statement per `execute`: a migration is code a reader can follow, with no SQL
splitter guessing where a trigger ends. `PRAGMA user_version` holds how many have run; a file with a
higher number was written by a newer archprobe and is refused. Tables owned by other packages
(track's `signals`) are registered by them through `Ledger.register_table`, not listed here.
"""

from __future__ import annotations

import sqlite3

CHAINED = ("runs", "tasks", "attempts", "outcomes", "interventions", "events", "steps")


def _append_only(db: sqlite3.Connection, table: str) -> None:
    for op in ("update", "delete"):
        db.execute(f"CREATE TRIGGER IF NOT EXISTS {table}_no_{op} BEFORE {op.upper()} ON {table} "
                   f"BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: {table} rows are never {op}d'); END")


def m001_core(db: sqlite3.Connection) -> None:
    db.execute("""CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, created_at REAL NOT NULL, source TEXT NOT NULL,
        task_set_hash TEXT NOT NULL, task_set_path TEXT, model TEXT NOT NULL, endpoint TEXT NOT NULL,
        attempts_per_task INTEGER NOT NULL, params TEXT NOT NULL, host TEXT NOT NULL, operator TEXT NOT NULL,
        interventions_tracked INTEGER NOT NULL)""")
    db.execute("""CREATE TABLE tasks (
        run_id TEXT NOT NULL REFERENCES runs, task_id TEXT NOT NULL, position INTEGER NOT NULL,
        content TEXT NOT NULL, PRIMARY KEY (run_id, task_id))""")
    db.execute("""CREATE TABLE attempts (
        attempt_id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs, task_id TEXT NOT NULL,
        sample INTEGER NOT NULL, try INTEGER NOT NULL, retry_of TEXT REFERENCES attempts,
        started_at REAL NOT NULL, request TEXT NOT NULL)""")
    db.execute("CREATE INDEX attempts_by_run ON attempts (run_id, task_id, sample, try)")
    db.execute("""CREATE TABLE outcomes (
        attempt_id TEXT PRIMARY KEY REFERENCES attempts,
        outcome TEXT NOT NULL CHECK (outcome IN ('pass','fail','error','timeout','cancelled')),
        seconds REAL, tokens_in INTEGER, tokens_out INTEGER, server_model TEXT, answer TEXT,
        detail TEXT NOT NULL, recorded_at REAL NOT NULL)""")
    db.execute("""CREATE TABLE interventions (
        id INTEGER PRIMARY KEY AUTOINCREMENT, attempt_id TEXT NOT NULL REFERENCES attempts,
        kind TEXT NOT NULL CHECK (kind IN ('message','approval','fix')), note TEXT NOT NULL,
        operator TEXT NOT NULL, recorded_at REAL NOT NULL)""")
    db.execute("""CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL,
        detail TEXT NOT NULL)""")


def m002_append_only(db: sqlite3.Connection) -> None:
    """Nothing recorded is ever rewritten (a guard against mistakes; the hash chain is the evidence)."""
    for table in ("outcomes", "attempts", "interventions", "runs"):
        _append_only(db, table)


def m003_track_signals(db: sqlite3.Connection) -> None:
    """Kept as a number only: `track` registers its `signals` table itself (Ledger.register_table).
    Ledgers made before that already have the table, with the same columns."""


def m004_hash_chain(db: sqlite3.Connection) -> None:
    """Every row of a run carries its position in the run's chain, the previous row's hash and its own."""
    db.execute("ALTER TABLE outcomes ADD COLUMN run_id TEXT")
    db.execute("ALTER TABLE interventions ADD COLUMN run_id TEXT")
    for table in ("runs", "tasks", "attempts", "outcomes", "interventions", "events"):
        db.execute(f"ALTER TABLE {table} ADD COLUMN seq INTEGER")
        db.execute(f"ALTER TABLE {table} ADD COLUMN prev_hash TEXT")
        db.execute(f"ALTER TABLE {table} ADD COLUMN row_hash TEXT")
    db.execute("CREATE INDEX outcomes_by_run ON outcomes (run_id)")
    db.execute("CREATE INDEX interventions_by_run ON interventions (run_id)")
    db.execute("CREATE INDEX events_by_run ON events (run_id)")
    # the last link of each run's chain: a cache for appending, cross-checked by `eval verify`
    db.execute("CREATE TABLE chain_heads (run_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, hash TEXT NOT NULL)")
    _append_only(db, "events")
    _append_only(db, "tasks")


def m005_agent_steps(db: sqlite3.Connection) -> None:
    """The agent runner: turns and tool calls as steps, dollars and turns per attempt."""
    db.execute("ALTER TABLE outcomes ADD COLUMN cost_usd REAL")
    db.execute("ALTER TABLE outcomes ADD COLUMN turns INTEGER")
    db.execute("""CREATE TABLE steps (
        attempt_id TEXT NOT NULL REFERENCES attempts, run_id TEXT NOT NULL, n INTEGER NOT NULL,
        kind TEXT NOT NULL, detail TEXT NOT NULL, seq INTEGER, prev_hash TEXT, row_hash TEXT,
        PRIMARY KEY (attempt_id, n))""")
    db.execute("CREATE INDEX steps_by_run ON steps (run_id)")
    _append_only(db, "steps")


MIGRATIONS = [m001_core, m002_append_only, m003_track_signals, m004_hash_chain, m005_agent_steps]
