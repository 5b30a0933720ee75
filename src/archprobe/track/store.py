"""Snapshots into the ledger (table `signals`, migration 3) and series back out."""

from __future__ import annotations

import json
import time

from archprobe.eval.ledger import Ledger
from archprobe.track.signals import REACH, USAGE


def record(ledger: Ledger, kind: str, subject: str, source: str, rows: list[tuple], at: float | None = None) -> float:
    assert kind in (REACH, USAGE)
    at = time.time() if at is None else at
    with ledger.transaction():
        ledger.db.executemany(
            "INSERT INTO signals (at, kind, subject, source, metric, value, labels) VALUES (?,?,?,?,?,?,?)",
            [(at, kind, subject, source, r[0], float(r[1]), json.dumps(r[2] if len(r) > 2 else {})) for r in rows])
    return at


def series(ledger: Ledger, subject: str) -> list[dict]:
    """One series per (kind, source, metric, labels), points in time order."""
    rows = ledger.db.execute("SELECT at, kind, source, metric, value, labels FROM signals WHERE subject=? "
                             "ORDER BY kind, source, metric, labels, at", (subject,))
    out: dict[tuple, dict] = {}
    for at, kind, source, metric, value, labels in rows:
        key = (kind, source, metric, labels)
        s = out.setdefault(key, {"kind": kind, "source": source, "metric": metric, "labels": json.loads(labels),
                                 "points": []})
        s["points"].append([at, value])
    return list(out.values())


def subjects(ledger: Ledger) -> list[str]:
    return [r[0] for r in ledger.db.execute("SELECT DISTINCT subject FROM signals ORDER BY subject")]
