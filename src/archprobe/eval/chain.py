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
    # default=repr: a value no archprobe row holds (a BLOB inserted by hand) hashes, so the row is flagged
    body = json.dumps([table, values], sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True,
                      default=repr)
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


def _placed(seq) -> bool:
    """A place in the chain: a non-negative int (a bool, float, string or negative number is not one)."""
    return isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0


def check(run_id: str, rows: list[ChainRow], head: tuple | None = None, *, head_expected: bool = False) -> list[dict]:
    """Every break in one run's chain, located: [{"seq", "table", "key", "problem"}]; [] when intact.

    Walks the places that hold rows, in order (never the numbers between them: one row at seq 10**12
    is one gap, reported as one range). At one place the row that hashes and links right is kept and
    every other one is flagged as inserted, an exact copy included. `head` is (seq, hash) as recorded
    elsewhere (the ledger's chain_heads, an export's claim); whatever it claims is checked against the
    rows, never trusted to bound a loop."""
    breaks = []
    by_seq: dict[int, list[ChainRow]] = {}
    for r in rows:
        if _placed(r.seq):
            by_seq.setdefault(r.seq, []).append(r)
        else:
            breaks.append(_break(r, "row is not in the chain (inserted by hand, or written before the chain existed)"))
    kept: dict[int, ChainRow] = {}
    expected_prev: str | None = genesis(run_id)
    want = 0
    for seq in sorted(by_seq):
        here = by_seq[seq]
        if seq != want:
            breaks.append({"seq": want if seq - 1 == want else [want, seq - 1], "table": None, "key": None,
                           "problem": "row(s) missing from the chain (deleted)"})
            expected_prev = None   # resynchronise on the next row, so one deletion is reported once
        sound = [r.row_hash == row_hash(r.prev_hash or "", r.table, r.values) for r in here]
        linked = [expected_prev is None or r.prev_hash == expected_prev for r in here]
        best = min(range(len(here)), key=lambda i: (not sound[i], not linked[i], i))
        keep = here[best]
        for i, r in enumerate(here):
            if i != best:
                same = r.values == keep.values and r.row_hash == keep.row_hash
                breaks.append(_break(r, "a second row at this place in the chain (inserted"
                                        + (", a copy of the row there)" if same else ")")))
        if not sound[best]:
            breaks.append(_break(keep, "content does not match the row's hash (edited)"))
        elif not linked[best]:
            breaks.append(_break(keep, "does not link to the row before it (that row was edited, replaced or "
                                       "re-hashed)"))
        kept[seq] = keep
        expected_prev = keep.row_hash
        want = seq + 1
    last = want - 1
    if head is None:
        if head_expected:
            breaks.append({"seq": None, "table": None, "key": None,
                           "problem": "no recorded head (it was removed): the chain's end cannot be checked"})
        return breaks
    head_seq, head_hash = (head + (None, None))[:2] if isinstance(head, tuple) else (None, None)
    if not _placed(head_seq) or not isinstance(head_hash, str):
        breaks.append({"seq": None, "table": None, "key": None,
                       "problem": "the recorded head is malformed (not a place and a hash): forged or damaged"})
        return breaks
    if head_seq > last:
        breaks.append({"seq": last + 1 if head_seq == last + 1 else [last + 1, head_seq], "table": None,
                       "key": None, "problem": "the chain's recorded head is past its last row: rows deleted at "
                                               "the end"})
    elif head_seq in kept and kept[head_seq].row_hash != head_hash:
        breaks.append(_break(kept[head_seq], "differs from the chain's recorded head"))
    for seq in sorted(s for s in kept if s > head_seq):
        for r in by_seq[seq]:
            breaks.append(_break(r, "after the chain's recorded head (appended by hand)"))
    return breaks


def _break(r: ChainRow, problem: str) -> dict:
    return {"seq": r.seq, "table": r.table, "key": r.key, "problem": problem}


def head_of(run_id: str, rows: list[ChainRow]) -> dict:
    chained = sorted((r for r in rows if _placed(r.seq)), key=lambda r: r.seq)
    return {"seq": chained[-1].seq if chained else None,
            "hash": chained[-1].row_hash if chained else genesis(run_id)}
