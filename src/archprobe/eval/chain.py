"""The ledger's hash chain: each row of a run carries sha256(previous row's hash, its own content).

Why a chain and not only triggers: a trigger stops an honest mistake, not a person who drops it,
edits a row and recreates it. With the chain, editing a row breaks its own hash, deleting one leaves
a gap in the sequence, inserting one adds a row outside the sequence (or a second row at one place).
`check` names each such row. A full rewrite of a run from the edited row on is caught only against a
head hash kept elsewhere: `eval report` prints it, and an export carries it for a third party.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

CHAIN_COLUMNS = ("seq", "prev_hash", "row_hash")


def genesis(run_id: str) -> str:
    return "sha256:" + hashlib.sha256(f"archprobe.chain/1\0{run_id}".encode()).hexdigest()


def row_hash(prev_hash: str, table: str, values: dict) -> str:
    """values: every column of the row but prev_hash and row_hash (seq included)."""
    body = json.dumps([table, values], sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    return "sha256:" + hashlib.sha256(f"{prev_hash}\0{body}".encode()).hexdigest()


@dataclass
class ChainRow:
    table: str
    key: str              # how a person finds the row: table and its primary key
    values: dict          # content columns, seq included
    prev_hash: str | None
    row_hash: str | None

    @property
    def seq(self):
        return self.values.get("seq")

    def to_dict(self) -> dict:
        return {"table": self.table, "key": self.key, "values": self.values, "prev_hash": self.prev_hash,
                "row_hash": self.row_hash}


def check(run_id: str, rows: list[ChainRow], head: tuple[int, str] | None = None) -> list[dict]:
    """Every break in one run's chain, located: [{"seq", "table", "key", "problem"}]; [] when intact."""
    breaks = []
    chained = [r for r in rows if isinstance(r.seq, int)]
    for r in rows:
        if not isinstance(r.seq, int):
            breaks.append(_break(r, "row is not in the chain (inserted by hand, or written before the chain existed)"))
    by_seq: dict[int, list[ChainRow]] = {}
    for r in chained:
        by_seq.setdefault(r.seq, []).append(r)
    expected_prev = genesis(run_id)
    last = max(by_seq, default=-1)
    seq = 0
    while seq <= last:
        here = by_seq.get(seq)
        if not here:
            gap_end = seq
            while gap_end + 1 <= last and not by_seq.get(gap_end + 1):
                gap_end += 1
            breaks.append({"seq": seq if gap_end == seq else [seq, gap_end], "table": None, "key": None,
                           "problem": "row(s) missing from the chain (deleted)"})
            seq = gap_end + 1
            nxt = by_seq[seq][0]
            expected_prev = nxt.prev_hash  # resynchronise so one deletion is reported once
            continue
        if len(here) > 1:
            for r in here:
                if r.row_hash != row_hash(r.prev_hash or "", r.table, r.values) or r.prev_hash != expected_prev:
                    breaks.append(_break(r, "a second row at this place in the chain (inserted)"))
            here = [r for r in here if r.row_hash == row_hash(r.prev_hash or "", r.table, r.values)] or here
        r = here[0]
        if r.row_hash != row_hash(r.prev_hash or "", r.table, r.values):
            breaks.append(_break(r, "content does not match the row's hash (edited)"))
        elif r.prev_hash != expected_prev:
            breaks.append(_break(r, "does not link to the row before it (that row was edited, replaced or "
                                    "re-hashed)"))
        expected_prev = r.row_hash
        seq += 1
    if head is not None and chained:
        head_seq, head_hash = head
        if head_seq > last:
            breaks.append({"seq": [last + 1, head_seq], "table": None, "key": None,
                           "problem": "the chain's recorded head is past its last row: rows deleted at the end"})
        elif by_seq.get(head_seq) and by_seq[head_seq][0].row_hash != head_hash:
            breaks.append(_break(by_seq[head_seq][0], "differs from the chain's recorded head"))
        for seq in range(head_seq + 1, last + 1):
            for r in by_seq.get(seq, []):
                breaks.append(_break(r, "after the chain's recorded head (appended by hand)"))
    return breaks


def _break(r: ChainRow, problem: str) -> dict:
    return {"seq": r.seq, "table": r.table, "key": r.key, "problem": problem}


def head_of(run_id: str, rows: list[ChainRow]) -> dict:
    chained = sorted((r for r in rows if isinstance(r.seq, int)), key=lambda r: r.seq)
    return {"seq": chained[-1].seq if chained else None,
            "hash": chained[-1].row_hash if chained else genesis(run_id)}
