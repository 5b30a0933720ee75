"""Snapshots into the ledger (track's own `signals` table, registered through Ledger) and series back out."""

from __future__ import annotations

import json
import time

from archprobe.eval.ledger import Ledger
from archprobe.track.signals import ADAPTATION, REACH, USAGE

TABLE = "signals"
COLUMNS = {"at": "REAL NOT NULL", "kind": "TEXT NOT NULL CHECK (kind IN ('reach','usage'))",
           "subject": "TEXT NOT NULL", "source": "TEXT NOT NULL", "metric": "TEXT NOT NULL",
           "value": "REAL NOT NULL", "labels": "TEXT NOT NULL"}


# adaptation signals live in a table of their own: ledgers written before they existed constrain `signals`
# to reach and usage, and the separate table keeps them out of any query over the other two
ADAPTATION_TABLE = "adaptation_signals"
ADAPTATION_COLUMNS = {**COLUMNS, "kind": "TEXT NOT NULL CHECK (kind = 'adaptation')"}


def _table(ledger: Ledger, kind: str = REACH) -> str:
    if kind == ADAPTATION:
        ledger.register_table(ADAPTATION_TABLE, ADAPTATION_COLUMNS,
                              indexes={"adaptation_by_subject": ("subject", "metric", "at")})
        return ADAPTATION_TABLE
    ledger.register_table(TABLE, COLUMNS, indexes={"signals_by_subject": ("subject", "kind", "metric", "at")})
    return TABLE


def record(ledger: Ledger, kind: str, subject: str, source: str, rows: list[tuple], at: float | None = None) -> float:
    assert kind in (REACH, USAGE, ADAPTATION)
    at = time.time() if at is None else at
    table = _table(ledger, kind)
    ledger.insert_rows(table, [{"at": at, "kind": kind, "subject": subject, "source": source, "metric": r[0],
                                "value": float(r[1]), "labels": json.dumps(r[2] if len(r) > 2 else {})} for r in rows])
    return at


def series(ledger: Ledger, subject: str) -> list[dict]:
    """One series per (kind, source, metric, labels), points in time order."""
    cols, order = ["at", "kind", "source", "metric", "value", "labels"], ["kind", "source", "metric", "labels", "at"]
    rows = [r for table in (TABLE, ADAPTATION_TABLE)
            for r in ledger.select(table, cols, where={"subject": subject}, order_by=order)]
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["kind"], r["source"], r["metric"], r["labels"])
        s = out.setdefault(key, {"kind": r["kind"], "source": r["source"], "metric": r["metric"],
                                 "labels": json.loads(r["labels"]), "points": []})
        s["points"].append([r["at"], r["value"]])
    return list(out.values())


def subjects(ledger: Ledger) -> list[str]:
    return sorted({r["subject"] for table in (TABLE, ADAPTATION_TABLE)
                   for r in ledger.select(table, ["subject"], order_by=["subject"], distinct=True)})
