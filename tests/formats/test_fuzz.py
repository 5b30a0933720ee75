"""Property test: random and mutated headers produce a parsed header or one CheckpointError, never
anything else (no other exception type, no hang)."""

from __future__ import annotations

import json
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archprobe.errors import CheckpointError
from archprobe.formats.safetensors import header_length, parse_header

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12)

entry = st.fixed_dictionaries({
    "dtype": st.sampled_from(["F32", "BF16", "U8", "F8_E8M0", "I32", "X9"]) | json_values,
    "shape": st.lists(st.integers(-3, 40), max_size=4) | json_values,
    "data_offsets": st.lists(st.integers(-10, 10_000), min_size=0, max_size=3) | json_values,
})
headers = st.dictionaries(st.text(max_size=12), entry | json_values, max_size=6)


def _check(raw: bytes, file_bytes: int | None) -> None:
    try:
        parse_header(raw, "fuzz.safetensors", file_bytes)
    except CheckpointError as exc:
        assert "fuzz.safetensors" in str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(headers, st.integers(0, 20_000) | st.none())
def test_structured_random_headers(doc, file_bytes):
    _check(json.dumps(doc).encode(), file_bytes)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 20_000) | st.none())
def test_random_bytes(raw, file_bytes):
    _check(raw, file_bytes)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 400), st.integers(0, 255))
def test_mutated_valid_header(pos, byte):
    good = json.dumps({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                       "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]}}).encode()
    raw = bytearray(good)
    raw[pos % len(raw)] = byte
    _check(bytes(raw), 8 + len(raw) + 32)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=16), st.integers(0, 2**40) | st.none())
def test_random_length_prefix(prefix, size):
    try:
        n = header_length(prefix, "fuzz.safetensors", size)
        assert n == struct.unpack("<Q", prefix[:8])[0]
    except CheckpointError as exc:
        assert "fuzz.safetensors" in str(exc)
