"""Every reader's worst case against its documented memory cap (formats/limits.py), in process.

Each case builds a maximal hostile input for one reader, with the caps scaled down so it runs in
seconds, and holds the reader's peak RSS growth (tests/support/rss.py) to 2x the documented cost
plus SLACK, a fixed allowance for the interpreter and allocator (arenas, free lists, imports on
first use). Before the fixes these cases cost 10-30x their bytes (a 20 MB header: 224-580 MB).
"""

from __future__ import annotations

import struct

import pytest

from archprobe.errors import ArchprobeError
from archprobe.formats import gguf
from archprobe.formats.hub import _load_list
from archprobe.formats.jsontext import load_fast, load_strict, parse_cost
from archprobe.formats.safetensors import read_header
from tests.support.rss import peak_rss_growth

SLACK = 40 * 2**20
MB = 2**20


def _header_file(path, entries: list[bytes], data_bytes: int, pad_to: int | None = None) -> int:
    raw = b"{" + b",".join(entries) + b"}"
    if pad_to:
        raw += b" " * (pad_to - len(raw))
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + data_bytes)   # sparse data region
    return len(raw)


def _header_cost(header_bytes: int, records: int) -> int:
    """The documented cost of one header (formats/limits.py): its bytes, 0.4x for the spans, 300 B a record."""
    return int(1.4 * header_bytes) + 300 * records


def _fill(pattern: bytes, budget: int) -> list[bytes]:
    """Entries `pattern % (i, i, i + 1)` (one byte each, in offset order) up to `budget` bytes of JSON."""
    out, used, i = [], 2, 0
    while True:
        entry = pattern % (i, i, i + 1)
        if used + len(entry) + 1 > budget:
            return out
        out.append(entry)
        used += len(entry) + 1
        i += 1


DISTINCT = b'"t%d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}'
FOLDED = b'"m.experts.%d.w":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}'


@pytest.mark.parametrize("kind", ["distinct", "folded-unsorted", "metadata-strings"])
def test_a_maximal_safetensors_header(tmp_path, monkeypatch, kind):
    header_cap, records = 24 * MB, 40_000
    monkeypatch.setenv("ARCHPROBE_MAX_HEADER_BYTES", str(header_cap))
    monkeypatch.setenv("ARCHPROBE_MAX_TENSOR_ENTRIES", str(records))
    if kind == "distinct":       # every entry its own record: stops at the record cap
        entries = _fill(DISTINCT, header_cap)
    elif kind == "folded-unsorted":   # listed in reverse offset order: the overlap check must sort them
        entries = _fill(FOLDED, header_cap)[::-1]
    else:                        # a 1 MB metadata of 2-byte strings (10-15x as Python str), then padding
        meta = b'"__metadata__":{' + b",".join(b'"%d":"ab"' % i for i in range(90_000)) + b"}"
        entries = [meta, *_fill(DISTINCT, 100_000)]
    data = len(entries)
    path = tmp_path / "m.safetensors"
    size = _header_file(path, entries, data, pad_to=header_cap)
    assert size <= header_cap
    with peak_rss_growth() as rss:
        try:
            h = read_header(path)
            outcome = f"{len(h.tensors)} records"
        except ArchprobeError as exc:
            outcome = str(exc)
    bound = 2 * _header_cost(header_cap, records) + SLACK
    assert rss.bytes <= bound, (outcome, rss.bytes / MB, bound / MB)
    if kind == "distinct":
        assert "over 40,000 tensor entries" in outcome


def _json_at_cost(cost: int, item: bytes) -> bytes:
    """A JSON object holding one list of `item`s whose estimated parse cost is just under `cost`."""
    n = 1
    while parse_cost(b'{"a":[' + b",".join([item] * (2 * n)) + b"]}") < cost:
        n *= 2
    lo, hi = n, 2 * n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if parse_cost(b'{"a":[' + b",".join([item] * mid) + b"]}") <= cost else (lo, mid)
    return b'{"a":[' + b",".join([item] * lo) + b"]}"


@pytest.mark.parametrize("item", [b"[]", b"{}", b'"ab"', b"1.5", b'{"k":[]}', '"\U0001f600abcdefgh"'.encode()],
                         ids=["lists", "dicts", "strings", "floats", "nested", "non-ascii"])
@pytest.mark.parametrize("reader", ["config", "index", "listing"])
def test_json_documents_within_their_cost_cap(monkeypatch, item, reader):
    cost_cap = 24 * MB
    monkeypatch.setenv("ARCHPROBE_MAX_JSON_COST", str(cost_cap))
    raw = _json_at_cost(cost_cap, item)
    if reader == "listing":
        raw = raw[len(b'{"a":'):-1]       # the listing is a JSON list
    with peak_rss_growth() as rss:
        if reader == "config":
            doc = load_strict(raw, "config.json", "config.json", 1 << 40)
        elif reader == "index":
            doc = load_fast(raw, "index.json", "the index", 1 << 40)
        else:
            doc = _load_list(raw, "org/name")
        del doc
    assert rss.bytes <= 2 * cost_cap + SLACK, rss.bytes / MB
    over = raw[:-2] + b"," + b",".join([item] * (len(raw) // len(item) // 4 + 10)) + raw[-2:]
    with pytest.raises(ArchprobeError, match="MAX_JSON_COST"):
        {"config": lambda: load_strict(over, "c", "config.json", 1 << 40),
         "index": lambda: load_fast(over, "i", "the index", 1 << 40),
         "listing": lambda: _load_list(over[len(b'{"a":'):-1], "org/name")}[reader]()


def _gguf_string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def test_gguf_kept_metadata_is_charged_against_its_cap(tmp_path, monkeypatch):
    """Hundreds of u8 arrays just under the kept-array length: each item a Python int (8-40 bytes from
    one byte). Documented cost: MAX_KEPT_BYTES of kept values plus ~3 read blocks of MAX_BLOCK."""
    monkeypatch.setattr(gguf, "MAX_KEPT_BYTES", 8 * MB)
    monkeypatch.setattr(gguf, "MAX_BLOCK", 4 * MB)
    arrays, items = 300, gguf.MAX_KEPT
    body = b"".join(_gguf_string(b"a.k%d" % i) + struct.pack("<IIQ", 9, 0, items) + b"\x01" * items
                    for i in range(arrays))
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, arrays) + body)
    with peak_rss_growth() as rss, pytest.raises(ArchprobeError, match="keep over 8 MB"):
        gguf.read_gguf(path)
    assert rss.bytes <= 2 * (8 * MB + 3 * 4 * MB) + SLACK, rss.bytes / MB


def test_gguf_long_names_are_not_kept(tmp_path):
    name = b"n" * (gguf.MAX_NAME + 1)
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _gguf_string(name) + struct.pack("<IB", 0, 1))
    with pytest.raises(ArchprobeError, match="bytes long"):
        gguf.read_gguf(path)
