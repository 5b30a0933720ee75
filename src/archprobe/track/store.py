"""Snapshots into the ledger (track's own `signals` table, registered through Ledger) and series back out."""

from __future__ import annotations

import json
import time

from archprobe.eval.ledger import Ledger
from archprobe.track.signals import REACH, USAGE

TABLE = "signals"
COLUMNS = {"at": "REAL NOT NULL", "kind": "TEXT NOT NULL CHECK (kind IN ('reach','usage'))",
           "subject": "TEXT NOT NULL", "source": "TEXT NOT NULL", "metric": "TEXT NOT NULL",
           "value": "REAL NOT NULL", "labels": "TEXT NOT NULL"}


def _table(ledger: Ledger) -> None:
    ledger.register_table(TABLE, COLUMNS, indexes={"signals_by_subject": ("subject", "kind", "metric", "at")})


def record(ledger: Ledger, kind: str, subject: str, source: str, rows: list[tuple], at: float | None = None) -> float:
    assert kind in (REACH, USAGE)
    at = time.time() if at is None else at
    _table(ledger)
    ledger.insert_rows(TABLE, [{"at": at, "kind": kind, "subject": subject, "source": source, "metric": r[0],
                                "value": float(r[1]), "labels": json.dumps(r[2] if len(r) > 2 else {})} for r in rows])
    return at


def series(ledger: Ledger, subject: str) -> list[dict]:
    """One series per (kind, source, metric, labels), points in time order."""
    rows = ledger.select(TABLE, ["at", "kind", "source", "metric", "value", "labels"], where={"subject": subject},
                         order_by=["kind", "source", "metric", "labels", "at"])
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["kind"], r["source"], r["metric"], r["labels"])
        s = out.setdefault(key, {"kind": r["kind"], "source": r["source"], "metric": r["metric"],
                                 "labels": json.loads(r["labels"]), "points": []})
        s["points"].append([r["at"], r["value"]])
    return list(out.values())


def subjects(ledger: Ledger) -> list[str]:
    return [r["subject"] for r in ledger.select(TABLE, ["subject"], order_by=["subject"], distinct=True)]
