"""The evaluation ledger: one SQLite file, numbered migrations, append-only rows in a hash chain per run.

Why SQLite in WAL mode with a commit per event: an attempt that the ledger acknowledged (committed)
survives a SIGKILL at any moment, and a resume sees exactly which attempts have no outcome. Rows are
never updated or deleted (triggers refuse it), and each row of a run is chained to the one before it
(chain.py), so a hand edit that gets past the triggers is still detected and located by `verify`.
A full disk or a read-only file is a one-line LedgerError; what was committed before stays.
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
from archprobe.eval import chain
from archprobe.eval.migrations import CHAINED, MIGRATIONS
from archprobe.formats.limits import MAX_ATTEMPTS_PER_TASK

OUTCOMES = ("pass", "fail", "error", "timeout", "cancelled")
INTERVENTION_KINDS = ("message", "approval", "fix")
KEYS = {"runs": ("run_id",), "tasks": ("run_id", "task_id"), "attempts": ("attempt_id",),
        "outcomes": ("attempt_id",), "interventions": ("id",), "events": ("id",), "steps": ("attempt_id", "n")}
EXPORT_SCHEMA = "archprobe.eval-chain/1"


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
    cost_usd: float | None = None
    turns: int | None = None


def whoami() -> tuple[str, str]:
    """(host, operator): who ran it, for the independent re-run check (C1)."""
    import os

    host = os.environ.get("ARCHPROBE_HOST") or socket.gethostname()
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = "unknown"
    return host, os.environ.get("ARCHPROBE_OPERATOR") or user


def write_error(path: Path, exc: sqlite3.Error) -> LedgerError:
    """The one-line message for a write the file system refused."""
    text = str(exc).lower()
    if "full" in text:
        return LedgerError(f"{path}: disk full, the ledger cannot grow; everything committed before is kept",
                           hint="free space, then run the same command again (same --run-id) to resume")
    if "readonly" in text or "read-only" in text:
        return LedgerError(f"{path}: the ledger is read-only here",
                           hint="use a writable --ledger path (a copy is fine), then resume with the same --run-id")
    if "locked" in text or "busy" in text:
        return LedgerError(f"{path}: another process kept the ledger locked for too long ({exc})")
    return LedgerError(f"{path}: the ledger could not be written ({exc})")


class Ledger:
    @classmethod
    def existing(cls, path: str | Path, read_only: bool = False) -> Ledger:
        """For commands that read: a missing file is a user mistake, not a new empty ledger.
        read_only: the commands that only look (verify, report, export, track show) open the file with a
        `mode=ro` URI and change nothing in it, journal mode included: checking evidence must not
        alter it, and a ledger on a read-only mount (or someone else's file) must still be readable."""
        if not Path(path).is_file():
            raise LedgerError(f"{path}: no ledger here", hint="pass --ledger PATH (default ./archprobe-ledger.sqlite)")
        if read_only:
            book = cls(path, read_only=True)
            if not book.outdated:
                return book
            book.close()   # an older schema is upgraded first, as it always was (its queries need the columns)
        return cls(path)

    def __init__(self, path: str | Path, durable: bool = False, read_only: bool = False):
        self.path = Path(path)
        self.read_only = read_only
        self.outdated = False
        if self.path.exists() and not self.path.is_file():
            raise LedgerError(f"{self.path}: not a file")
        self._columns: dict[str, list[str]] = {}
        if read_only:
            self._open_read_only()
            return
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode loses nothing on a process crash (SIGKILL); FULL also survives power loss.
            self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self.db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.OperationalError as exc:
            if any(w in str(exc).lower() for w in ("readonly", "read-only", "full", "unable to open")):
                raise self._write_error(exc) from None
            raise LedgerError(f"{self.path}: not a usable SQLite ledger ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{self.path}: not a usable SQLite ledger ({exc})") from None

    def _open_read_only(self) -> None:
        """mode=ro; where even that needs a write (a WAL ledger whose -shm cannot be made on a read-only
        mount) the file is opened immutable=1, which reads it as it lies on disk."""
        from urllib.parse import quote

        base = "file:" + quote(str(self.path.resolve()))
        last: sqlite3.Error | None = None
        for query in ("?mode=ro", "?mode=ro&immutable=1"):
            try:
                self.db = sqlite3.connect(base + query, uri=True, isolation_level=None, check_same_thread=False,
                                          timeout=30)
                self.db.execute("PRAGMA query_only=ON")
                version = self.db.execute("PRAGMA user_version").fetchone()[0]
                break
            except sqlite3.DatabaseError as exc:
                last = exc
        else:
            raise LedgerError(f"{self.path}: not a usable SQLite ledger ({last})") from None
        if version > len(MIGRATIONS):
            raise LedgerError(f"{self.path}: written by a newer archprobe (schema {version} > {len(MIGRATIONS)})",
                              hint="upgrade archprobe to read it")
        self.outdated = version < len(MIGRATIONS)

    def _write_error(self, exc: sqlite3.Error) -> LedgerError:
        import os

        folder = self.path.resolve().parent
        try:
            read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY) or not os.access(folder, os.W_OK)
        except OSError:
            read_only = False
        if read_only:
            return write_error(self.path, sqlite3.OperationalError("read-only file system"))
        if "unable to open" in str(exc).lower():
            return LedgerError(f"{self.path}: cannot open or create the ledger here ({exc})",
                               hint="check the folder exists and is writable")
        return write_error(self.path, exc)

    def _migrate(self) -> None:
        """One migration per transaction; the version is read inside it, so two processes opening a new
        ledger at once never run the same migration twice."""
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise LedgerError(f"{self.path}: written by a newer archprobe (schema {version} > {len(MIGRATIONS)})",
                              hint="upgrade archprobe to read it")
        while version < len(MIGRATIONS):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                version = self.db.execute("PRAGMA user_version").fetchone()[0]
                if version < len(MIGRATIONS):
                    MIGRATIONS[version](self.db)
                    version += 1
                    self.db.execute(f"PRAGMA user_version={version}")
                self.db.execute("COMMIT")
            except Exception:
                self.db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        self.db.close()

    def transaction(self):
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on an exception); write failures become LedgerError."""
        return _Transaction(self)

    # -- the chain ------------------------------------------------------------------------------
    def _append(self, run_id: str, table: str, values: dict) -> None:
        """Insert one row as the next link of run_id's chain (inside an open transaction)."""
        head = self.db.execute("SELECT seq, hash FROM chain_heads WHERE run_id=?", (run_id,)).fetchone()
        seq, prev = (head[0] + 1, head[1]) if head else (0, chain.genesis(run_id))
        values = {k: int(v) if isinstance(v, bool) else v for k, v in values.items()}
        values["seq"] = seq
        digest = chain.row_hash(prev, table, values)
        cols = [*values, "prev_hash", "row_hash"]
        self.db.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                        [*values.values(), prev, digest])
        self.db.execute("INSERT INTO chain_heads VALUES (?,?,?) ON CONFLICT(run_id) DO UPDATE SET "
                        "seq=excluded.seq, hash=excluded.hash", (run_id, seq, digest))

    def chain_rows(self, run_id: str) -> list[chain.ChainRow]:
        rows = []
        for table in CHAINED:
            names = self._table_columns(table)
            # SQLite assigns `id` after the hash is made, so it is a locator, not content (seq orders rows)
            content = [c for c in names if c not in ("prev_hash", "row_hash", "id")]
            for r in self.db.execute(f"SELECT {', '.join(names)} FROM {table} WHERE run_id=?", (run_id,)):
                doc = dict(zip(names, r, strict=True))
                values = {c: doc[c] for c in content}
                key = table + ":" + "/".join(str(doc[k]) for k in KEYS[table])
                rows.append(chain.ChainRow(table, key, values, doc["prev_hash"], doc["row_hash"]))
        return sorted(rows, key=lambda r: (r.seq is None, r.seq if isinstance(r.seq, int) else 0, r.table))

    def _table_columns(self, table: str) -> list[str]:
        if table not in self._columns:
            self._columns[table] = [d[0] for d in self.db.execute(f"SELECT * FROM {table} LIMIT 0").description]
        return self._columns[table]

    def verify(self, run_id: str | None = None) -> dict:
        """Check the chain of one run (or every run); every break is located by table, key and seq."""
        run_ids = [run_id] if run_id else [r[0] for r in self.db.execute(
            "SELECT run_id FROM runs UNION SELECT run_id FROM chain_heads UNION SELECT run_id FROM attempts "
            "UNION SELECT run_id FROM events ORDER BY 1")]
        out = []
        if run_id and not self.db.execute("SELECT 1 FROM chain_heads WHERE run_id=? UNION SELECT 1 FROM runs WHERE "
                                          "run_id=? UNION SELECT 1 FROM events WHERE run_id=?",
                                          (run_id, run_id, run_id)).fetchone():
            self.run(run_id)   # the one-line "no run" with the recent runs named
        for rid in run_ids:
            rows = self.chain_rows(rid)
            head = self.db.execute("SELECT seq, hash FROM chain_heads WHERE run_id=?", (rid,)).fetchone()
            breaks = chain.check(rid, rows, tuple(head) if head else None, head_expected=bool(rows))
            orphans = self._orphans(rid)
            out.append({"run_id": rid, "rows": len(rows), "head": chain.head_of(rid, rows),
                        "ok": not breaks and not orphans, "breaks": breaks + orphans})
        return {"schema": "archprobe.eval-verify/1", "ledger": str(self.path), "ok": all(r["ok"] for r in out),
                "runs": out}

    def _orphans(self, run_id: str) -> list[dict]:
        """Outcomes or interventions with no run_id (inserted by hand without one) that point at this run."""
        found = []
        for table in ("outcomes", "interventions"):
            for (key,) in self.db.execute(f"SELECT t.attempt_id FROM {table} t JOIN attempts a USING (attempt_id) "
                                          f"WHERE a.run_id=? AND t.run_id IS NULL", (run_id,)):
                found.append({"seq": None, "table": table, "key": f"{table}:{key}",
                              "problem": "row is not in the chain (inserted by hand)"})
        return found

    def export_run(self, run_id: str) -> dict:
        """The run's rows in chain order with their hashes, so a third party can verify it (verify_export)."""
        self.run(run_id)
        rows = self.chain_rows(run_id)
        return {"schema": EXPORT_SCHEMA, "run_id": run_id, "head": chain.head_of(run_id, rows),
                "rows": [r.to_dict() for r in rows]}

    def import_rows(self, doc: dict) -> None:
        """Load an exported run's rows as they are (hashes included), to report or audit it here."""
        with self.transaction():
            self.db.execute("PRAGMA defer_foreign_keys=ON")
            for r in doc["rows"]:
                table = r["table"]
                if table not in CHAINED:
                    raise LedgerError(f"exported run: unknown table {table!r}")
                values = {k: v for k, v in r["values"].items() if k in self._table_columns(table)}
                cols = [*values, "prev_hash", "row_hash"]
                # OR IGNORE: a row repeated in the export (verify_export has flagged it) is loaded once
                try:
                    self.db.execute(f"INSERT OR IGNORE INTO {table} ({', '.join(cols)}) VALUES "
                                    f"({', '.join('?' * len(cols))})",
                                    [*values.values(), r.get("prev_hash"), r.get("row_hash")])
                except (sqlite3.IntegrityError, sqlite3.InterfaceError, OverflowError, TypeError) as exc:
                    raise LedgerError(f"exported run: row {r.get('key')!s:.80} cannot be loaded ({exc})") from None
            head = doc.get("head")
            if isinstance(head, dict) and chain._placed(head.get("seq")) and isinstance(head.get("hash"), str):
                # the export's claim, so this copy's verify checks the rows against it as the export's did
                self.db.execute("INSERT OR REPLACE INTO chain_heads VALUES (?,?,?)",
                                (doc["run_id"], head["seq"], head["hash"]))

    # -- tables owned by other packages ---------------------------------------------------------
    def register_table(self, name: str, columns: dict[str, str], indexes: dict[str, tuple[str, ...]] | None = None,
                       append_only: bool = True) -> None:
        """Create a table (if missing) for another package, e.g. track's `signals`; idempotent."""
        if not name.isidentifier() or name in CHAINED or name.startswith("sqlite"):
            raise ValueError(f"table name {name!r} is not available")
        with self.transaction():
            cols = ", ".join(f"{c} {decl}" for c, decl in columns.items())
            self.db.execute(f"CREATE TABLE IF NOT EXISTS {name} (id INTEGER PRIMARY KEY AUTOINCREMENT, {cols})")
            for index, on in (indexes or {}).items():
                self.db.execute(f"CREATE INDEX IF NOT EXISTS {index} ON {name} ({', '.join(on)})")
            if append_only:
                for op in ("update", "delete"):
                    self.db.execute(f"CREATE TRIGGER IF NOT EXISTS {name}_no_{op} BEFORE {op.upper()} ON {name} "
                                    f"BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: {name} rows are never "
                                    f"{op}d'); END")

    def insert_rows(self, table: str, rows: list[dict]) -> None:
        """Append rows to a registered table, in one transaction."""
        if not rows:
            return
        cols = list(rows[0])
        with self.transaction():
            self.db.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                [[r[c] for c in cols] for r in rows])

    def select(self, table: str, columns: list[str], where: dict | None = None, order_by: list[str] | None = None,
               distinct: bool = False) -> list[dict]:
        """Rows of a registered table as dicts: equality filters only, columns named by the caller."""
        exists = self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone()
        if not exists:
            return []
        sql = f"SELECT {'DISTINCT ' if distinct else ''}{', '.join(columns)} FROM {table}"
        params = []
        if where:
            sql += " WHERE " + " AND ".join(f"{k}=?" for k in where)
            params = list(where.values())
        if order_by:
            sql += " ORDER BY " + ", ".join(order_by)
        return [dict(zip(columns, r, strict=True)) for r in self.db.execute(sql, params)]

    # -- runs ---------------------------------------------------------------------------------
    def create_run(self, run_id: str, *, source: str, task_set_hash: str, task_set_path: str, model: str,
                   endpoint: str, attempts_per_task: int, params: dict, tasks: list[tuple[str, dict]],
                   interventions_tracked: bool = True, host: str | None = None, operator: str | None = None) -> None:
        me_host, me_op = whoami()
        with self.transaction():
            self._append(run_id, "runs", {
                "run_id": run_id, "created_at": time.time(), "source": source, "task_set_hash": task_set_hash,
                "task_set_path": task_set_path, "model": model, "endpoint": endpoint,
                "attempts_per_task": attempts_per_task, "params": json.dumps(params), "host": host or me_host,
                "operator": operator or me_op, "interventions_tracked": int(interventions_tracked)})
            for n, (tid, content) in enumerate(tasks):
                self._append(run_id, "tasks", {"run_id": run_id, "task_id": tid, "position": n,
                                               "content": json.dumps(content)})
            self._event(run_id, "run_created", {"attempts_per_task": attempts_per_task})

    def run(self, run_id: str) -> dict:
        names = [c for c in self._table_columns("runs") if c not in chain.CHAIN_COLUMNS]
        row = self.db.execute(f"SELECT {', '.join(names)} FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if row is None:
            known = [r[0] for r in self.db.execute("SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 5")]
            raise LedgerError(f"{self.path}: no run {run_id!r}",
                              hint=("recent runs: " + ", ".join(known)) if known else "the ledger has no runs yet")
        doc = dict(zip(names, row, strict=True))
        doc["params"] = _cell(doc["params"], f"run {run_id}: params", dict)
        n = doc.get("attempts_per_task")
        if not (isinstance(n, int) and 1 <= n <= MAX_ATTEMPTS_PER_TASK):
            raise LedgerError(f"{self.path}: run {run_id!r} records {str(n)[:40]} attempts per task, not 1 to "
                              f"{MAX_ATTEMPTS_PER_TASK:,} (edited by hand?)",
                              hint="`archprobe eval verify` locates edited rows")
        doc["interventions_tracked"] = bool(doc["interventions_tracked"])
        return doc

    def has_run(self, run_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone() is not None

    def runs(self) -> list[dict]:
        return [self.run(r[0]) for r in self.db.execute("SELECT run_id FROM runs ORDER BY created_at")]

    def task_contents(self, run_id: str) -> dict[str, dict]:
        rows = self.db.execute("SELECT task_id, content FROM tasks WHERE run_id=? ORDER BY position", (run_id,))
        return {tid: _cell(content, f"task {tid}", dict) for tid, content in rows}

    def task_ids(self, run_id: str) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT task_id FROM tasks WHERE run_id=? ORDER BY position",
                                              (run_id,))]

    # -- attempts -----------------------------------------------------------------------------
    def start_attempt(self, run_id: str, attempt_id: str, task_id: str, sample: int, try_: int,
                      retry_of: str | None, request: dict) -> None:
        with self.transaction():
            self._append(run_id, "attempts", {"attempt_id": attempt_id, "run_id": run_id, "task_id": task_id,
                                              "sample": sample, "try": try_, "retry_of": retry_of,
                                              "started_at": time.time(), "request": json.dumps(request)})

    def record_outcome(self, attempt_id: str, outcome: str, *, seconds: float | None = None,
                       tokens_in: int | None = None, tokens_out: int | None = None, server_model: str | None = None,
                       answer: str | None = None, detail: dict | None = None, cost_usd: float | None = None,
                       turns: int | None = None, steps: list[dict] | None = None,
                       approvals: list[dict] | None = None) -> None:
        """The outcome, the agent's steps and the operator's approvals of one attempt, in one transaction."""
        if outcome not in OUTCOMES:
            raise ValueError(outcome)
        run_id = self.attempt_run(attempt_id)
        with self.transaction():
            for n, step in enumerate(steps or []):
                self._append(run_id, "steps", {"attempt_id": attempt_id, "run_id": run_id, "n": n,
                                               "kind": str(step.get("kind")), "detail": json.dumps(step)})
            for a in approvals or []:
                self._intervention(run_id, attempt_id, "approval",
                                   f"{'approved' if a['approved'] else 'refused'}: {a['command']}"
                                   + (f" ({a['note']})" if a.get("note") else ""))
            self._append(run_id, "outcomes", {
                "attempt_id": attempt_id, "outcome": outcome, "seconds": seconds, "tokens_in": tokens_in,
                "tokens_out": tokens_out, "server_model": server_model, "answer": answer,
                "detail": json.dumps(detail or {}), "recorded_at": time.time(), "run_id": run_id,
                "cost_usd": cost_usd, "turns": turns})

    def attempts(self, run_id: str) -> list[AttemptRow]:
        rows = self.db.execute(
            "SELECT a.attempt_id, a.task_id, a.sample, a.try, a.retry_of, o.outcome, o.seconds, o.tokens_in, "
            "o.tokens_out, o.server_model, o.answer, o.detail, o.cost_usd, o.turns FROM attempts a "
            "LEFT JOIN outcomes o USING (attempt_id) WHERE a.run_id=? ORDER BY a.rowid", (run_id,))
        return [AttemptRow(*r[:6], *map(_number, r[6:9]), r[9], r[10],
                           _cell(r[11], f"attempt {r[0]}: detail", dict) if r[11] else {}, _number(r[12]),
                           _number(r[13])) for r in rows]

    def steps(self, attempt_id: str) -> list[dict]:
        rows = self.db.execute("SELECT detail FROM steps WHERE attempt_id=? ORDER BY n", (attempt_id,))
        return [_cell(d, f"attempt {attempt_id}: step", dict) for (d,) in rows]

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
            self._intervention(run_id, attempt_id, kind, note)

    def _intervention(self, run_id: str, attempt_id: str, kind: str, note: str) -> None:
        self._append(run_id, "interventions", {"attempt_id": attempt_id, "kind": kind, "note": note,
                                               "operator": whoami()[1], "recorded_at": time.time(),
                                               "run_id": run_id})
        self._event(run_id, "intervention", {"attempt_id": attempt_id, "kind": kind})

    def interventions(self, run_id: str) -> list[dict]:
        rows = self.db.execute("SELECT i.attempt_id, i.kind, i.note, i.operator, i.recorded_at FROM interventions i "
                               "JOIN attempts a USING (attempt_id) WHERE a.run_id=? ORDER BY i.id", (run_id,))
        return [dict(zip(("attempt_id", "kind", "note", "operator", "recorded_at"), r, strict=True)) for r in rows]

    def attempt_interventions(self, attempt_id: str) -> list[dict]:
        rows = self.db.execute("SELECT kind, note FROM interventions WHERE attempt_id=? AND kind != 'approval' "
                               "ORDER BY id", (attempt_id,))
        return [{"kind": k, "note": n} for k, n in rows]

    def event(self, run_id: str, kind: str, detail: dict) -> None:
        with self.transaction():
            self._event(run_id, kind, detail)

    def events(self, run_id: str) -> list[dict]:
        rows = self.db.execute("SELECT at, kind, detail FROM events WHERE run_id=? ORDER BY id", (run_id,))
        return [{"at": at, "kind": kind, "detail": _cell(d, f"run {run_id}: event", dict)} for at, kind, d in rows]

    def _event(self, run_id: str, kind: str, detail: dict) -> None:
        self._append(run_id, "events", {"run_id": run_id, "at": time.time(), "kind": kind,
                                        "detail": json.dumps(detail)})




def _number(value):
    """A numeric column as a number, or None where a hand edit put text (or a BLOB) there."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _cell(text, where: str, want: type):
    """A JSON column of a row: a ledger edited by hand can hold anything there; one LedgerError, not a crash."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise LedgerError(f"ledger row {where[:120]}: not the JSON archprobe wrote (edited by hand?)",
                          hint="`archprobe eval verify` locates edited rows") from None
    if not isinstance(value, want):
        raise LedgerError(f"ledger row {where[:120]}: not a {want.__name__} (edited by hand?)",
                          hint="`archprobe eval verify` locates edited rows")
    return value


class _Transaction:
    def __init__(self, ledger: Ledger):
        self.ledger = ledger

    def __enter__(self):
        try:
            self.ledger.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise write_error(self.ledger.path, exc) from None

    def __exit__(self, kind, exc, tb):
        db = self.ledger.db
        if kind is None:
            try:
                db.execute("COMMIT")
                return False
            except sqlite3.OperationalError as err:
                exc = err
                kind = type(err)
        if db.in_transaction:
            db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.OperationalError):
            raise write_error(self.ledger.path, exc) from None
        return False


def verify_export(doc: dict) -> dict:
    """Check an exported run (EXPORT_SCHEMA) without the ledger it came from. What the export claims
    (its head, its rows' places) is checked, never trusted: a missing or malformed head is a break."""
    if not isinstance(doc, dict) or doc.get("schema") != EXPORT_SCHEMA or not isinstance(doc.get("rows"), list):
        raise LedgerError(f"not an exported run (schema {EXPORT_SCHEMA})")
    run_id = doc.get("run_id")
    if not isinstance(run_id, str):
        raise LedgerError("exported run: `run_id` is not a string")
    rows = []
    for n, r in enumerate(doc["rows"]):
        if (not isinstance(r, dict) or not isinstance(r.get("table"), str) or not isinstance(r.get("key"), str)
                or not isinstance(r.get("values"), dict)
                or not all(isinstance(r.get(h), str | None) for h in ("prev_hash", "row_hash"))):
            raise LedgerError(f"exported run: row {n} needs table, key (strings), values (a mapping), prev_hash "
                              "and row_hash (strings)")
        rows.append(chain.ChainRow(r["table"], r["key"], r["values"], r.get("prev_hash"), r.get("row_hash")))
    head = doc.get("head")
    claimed = (head.get("seq"), head.get("hash")) if isinstance(head, dict) else (None, None) if head else None
    breaks = chain.check(run_id, rows, claimed, head_expected=True)
    return {"schema": "archprobe.eval-verify/1", "ok": not breaks, "runs": [
        {"run_id": run_id, "rows": len(rows), "head": chain.head_of(run_id, rows), "ok": not breaks,
         "breaks": breaks}]}
