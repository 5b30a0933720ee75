"""The entry-by-entry header walk (formats/headerstream.py) against the whole-document parse: on any valid
header (names with quotes, backslashes, `},"`, control characters, any Unicode; any JSON whitespace;
metadata anywhere) both give the same records; on mangled bytes the walk raises CheckpointError only."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archprobe.errors import CheckpointError
from archprobe.formats import safetensors as sf

DTYPES = {"F32": 4, "BF16": 2, "U8": 1, "I64": 8, "F8_E4M3": 1}
names = st.text(min_size=0, max_size=24) | st.sampled_from(['a},"b', 'x"y', "\\", "model.layers.0.mlp.experts.3.w",
                                                            "model.layers.1.mlp.experts.12.w", "__metadata_"])


@st.composite
def headers(draw):
    entries = draw(st.dictionaries(names.filter(lambda n: n != "__metadata__"),
                                   st.tuples(st.sampled_from(sorted(DTYPES)),
                                             st.lists(st.integers(0, 6), max_size=3)), max_size=12))
    doc, at = {}, 0
    for name, (dtype, shape) in entries.items():
        n = DTYPES[dtype]
        for d in shape:
            n *= d
        doc[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + n]}
        at += n
    if draw(st.booleans()):
        meta = draw(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3))
        items = list(doc.items())
        items.insert(draw(st.integers(0, len(items))), ("__metadata__", meta))
        doc = dict(items)
    style = draw(st.sampled_from([{}, {"indent": 1}, {"separators": (",", ":")}, {"ensure_ascii": False},
                                  {"indent": "\t", "ensure_ascii": False}]))
    return json.dumps(doc, **style).encode(), at


def _parse(raw: bytes, data: int, streamed: bool, monkeypatch):
    monkeypatch.setattr(sf, "WHOLE_PARSE_BYTES", -1 if streamed else 1 << 40)
    try:
        h = sf.parse_header(raw, "m.safetensors", 8 + len(raw) + data)
    except CheckpointError as exc:
        return ("error", type(exc).__name__)
    return ([(t.name, t.dtype, t.shape, t.nbytes, t.count, t.top) for t in h.tensors], h.metadata, h.num_tensors)


@settings(max_examples=200, deadline=None)
@given(headers())
def test_the_walk_reads_what_the_whole_parse_reads(header):
    raw, data = header
    with pytest.MonkeyPatch.context() as mp:
        assert _parse(raw, data, True, mp) == _parse(raw, data, False, mp)


@settings(max_examples=200, deadline=None)
@given(headers(), st.integers(0, 10_000), st.binary(min_size=1, max_size=3))
def test_mangled_headers_are_one_error(header, at, junk):
    raw, data = header
    at %= len(raw)
    mangled = raw[:at] + junk + raw[at + 1:]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sf, "WHOLE_PARSE_BYTES", -1)
        try:
            sf.parse_header(mangled, "m.safetensors", 8 + len(mangled) + data)
        except CheckpointError:
            pass


@pytest.mark.parametrize("streamed", [True, False])
def test_offsets_past_2_62_without_a_file_size_are_named(monkeypatch, streamed):
    """A hub header (file size unknown) with offsets past 2^62: named, not "malformed header"."""
    monkeypatch.setattr(sf, "WHOLE_PARSE_BYTES", -1 if streamed else 1 << 40)
    raw = json.dumps({"w": {"dtype": "EVIL", "shape": [1], "data_offsets": [2**62, 2**62 + 1]}}).encode()
    with pytest.raises(CheckpointError, match="data_offsets .* outside the data region"):
        sf.parse_header(raw, "m.safetensors")
