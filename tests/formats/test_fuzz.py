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


def _gguf_bytes() -> bytes:
    """A small valid GGUF file written by the gguf package (metadata of every kind, two tensor types)."""
    import os
    import tempfile

    import gguf
    import numpy as np

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "m.gguf")
        w = gguf.GGUFWriter(path, "llama")
        w.add_block_count(1)
        w.add_token_list(["a", "b", "c"])
        w.add_array("x.ints", [1, 2, 3])
        w.add_string("x.s", "s")
        w.add_tensor("t.weight", np.ones((2, 32), np.float32))
        q = gguf.quants.quantize(np.ones((2, 32), np.float32), gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor("u.weight", q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(path, "rb") as f:
            return f.read()


GGUF_GOOD = _gguf_bytes()


def _check_gguf(raw: bytes) -> None:
    from archprobe.formats.gguf import parse_gguf

    try:
        parse_gguf(lambda offset, n: raw[offset:offset + n], len(raw), "fuzz.gguf", "fuzz.gguf")
    except CheckpointError as exc:
        assert "fuzz.gguf" in str(exc)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, len(GGUF_GOOD) - 1), st.integers(0, 255), st.integers(0, 8))
def test_mutated_gguf_header(pos, byte, width):
    """Any byte (or run of bytes) of a real GGUF header changed: parsed, or one clean CheckpointError."""
    raw = bytearray(GGUF_GOOD)
    raw[pos:pos + max(1, width)] = bytes([byte]) * len(raw[pos:pos + max(1, width)])
    _check_gguf(bytes(raw))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 300))
def test_random_and_truncated_gguf(tail, cut):
    _check_gguf(b"GGUF\x03\x00\x00\x00" + tail)
    _check_gguf(GGUF_GOOD[:cut])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 12)), max_size=8))
def test_overlap_check_agrees_with_pairwise_comparison(spans):
    """The two-sorted-lists overlap test (formats/safetensors.py) against the definition: some pair of
    non-empty half-open spans intersects."""
    from archprobe.formats.safetensors import _overlapping

    pairs = [(b, b + n) for b, n in spans]
    truth = any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(pairs) for b in pairs[i + 1:])
    got = _overlapping(([b for b, _ in pairs], [e for _, e in pairs]))
    assert (got is not None) == truth
