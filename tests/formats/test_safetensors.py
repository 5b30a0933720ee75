"""safetensors headers: exact parse of files written by the safetensors library, and one clean
error naming the file for every kind of hostile header."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from archprobe.errors import CheckpointError
from archprobe.formats.safetensors import MAX_HEADER_BYTES, read_header
from archprobe.formats.sources import open_source


def _write_raw(path, header: dict | bytes, data: bytes = b"", length: int | None = None) -> str:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw) if length is None else length))
        f.write(raw)
        f.write(data)
    return str(path)


def test_library_written_file_parses_exactly(tmp_path):
    p = tmp_path / "m.safetensors"
    save_file({"a": np.zeros((3, 4), np.float32), "b": np.ones((5,), np.float16),
               "c": np.zeros((2, 2, 2), np.uint8)}, str(p), metadata={"format": "np"})
    h = read_header(p)
    got = {t.name: (t.dtype, t.shape, t.nbytes) for t in h.tensors}
    assert got == {"a": ("F32", (3, 4), 48), "b": ("F16", (5,), 10), "c": ("U8", (2, 2, 2), 8)}
    assert h.metadata == {"format": "np"}
    n = struct.unpack("<Q", p.read_bytes()[:8])[0]
    assert h.header_bytes == 8 + n
    assert h.file_bytes == os.path.getsize(p)


def test_expert_enumerations_are_folded_with_counts(tmp_path):
    tensors = {f"model.layers.1.mlp.experts.{e}.w1.weight": np.zeros((4, 8), np.float32) for e in range(6)}
    tensors["model.layers.1.mlp.gate.weight"] = np.zeros((6, 8), np.float32)
    save_file(tensors, str(tmp_path / "m.safetensors"))
    h = read_header(tmp_path / "m.safetensors")
    folded = {t.name: t.count for t in h.tensors}
    assert folded == {"model.layers.1.mlp.experts.*.w1.weight": 6, "model.layers.1.mlp.gate.weight": 1}
    assert h.num_tensors == 7


@pytest.mark.parametrize("case, message", [
    ("empty", "truncated"),
    ("short_prefix", "truncated"),
    ("length_past_end", "larger than the file"),
    ("over_cap", "over the"),
    ("bad_json", "not valid JSON"),
    ("not_object", "not an object"),
    ("overlap", "overlap"),
    ("out_of_range", "outside the data region"),
    ("negative_offset", "outside the data region"),
    ("size_mismatch", "needs"),
    ("negative_dim", "non-negative"),
    ("float_dim", "non-negative"),
    ("missing_dtype", "dtype"),
    ("bad_metadata", "__metadata__"),
])
def test_hostile_headers_give_one_clear_error(tmp_path, case, message):
    p = tmp_path / f"{case}.safetensors"
    ok = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    if case == "empty":
        p.write_bytes(b"")
    elif case == "short_prefix":
        p.write_bytes(b"\x10\x00\x00")
    elif case == "length_past_end":
        _write_raw(p, {"a": ok}, b"\0" * 8, length=10_000)
    elif case == "over_cap":
        _write_raw(p, b"{}", length=MAX_HEADER_BYTES + 1)
        with open(p, "ab") as f:  # a sparse file larger than the claimed header
            f.truncate(MAX_HEADER_BYTES + 100)
    elif case == "bad_json":
        _write_raw(p, b'{"a": {"dtype": "F32",', b"")
    elif case == "not_object":
        _write_raw(p, b"[1, 2, 3]")
    elif case == "overlap":
        _write_raw(p, {"a": ok, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12)
    elif case == "out_of_range":
        _write_raw(p, {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8)
    elif case == "negative_offset":
        _write_raw(p, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}, b"\0" * 8)
    elif case == "size_mismatch":
        _write_raw(p, {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8)
    elif case == "negative_dim":
        _write_raw(p, {"a": {"dtype": "F32", "shape": [-2, -1], "data_offsets": [0, 8]}}, b"\0" * 8)
    elif case == "float_dim":
        _write_raw(p, {"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, b"\0" * 8)
    elif case == "missing_dtype":
        _write_raw(p, {"a": {"shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8)
    elif case == "bad_metadata":
        _write_raw(p, {"__metadata__": [1], "a": ok}, b"\0" * 8)
    with pytest.raises(CheckpointError) as info:
        read_header(p)
    assert str(p) in str(info.value)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_dtype_is_kept_and_reported(tmp_path):
    p = _write_raw(tmp_path / "m.safetensors", {
        "new": {"dtype": "F3_E1M1", "shape": [8], "data_offsets": [0, 3]},
        "old": {"dtype": "BF16", "shape": [2], "data_offsets": [3, 7]}}, b"\0" * 7)
    h = read_header(p)
    assert {t.name: t.dtype for t in h.tensors} == {"new": "F3_E1M1", "old": "BF16"}
    from archprobe.structure.inspect import inspect_checkpoint

    doc = inspect_checkpoint(p)
    assert any("F3_E1M1" in w for w in doc["warnings"])
    assert doc["params"]["total"] == 10  # counted by shape


def test_index_naming_a_shard_outside_the_folder_is_refused(tmp_path):
    save_file({"a": np.zeros(2, np.float32)}, str(tmp_path / "ok.safetensors"))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "ok.safetensors", "b": "../evil.safetensors"}}))
    with pytest.raises(CheckpointError, match=r"evil\.safetensors"):
        open_source(str(tmp_path))


def test_symlinked_shard_escaping_the_folder_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    save_file({"a": np.zeros(2, np.float32)}, str(outside / "x.safetensors"))
    ck = tmp_path / "ck"
    ck.mkdir()
    os.symlink(outside / "x.safetensors", ck / "model.safetensors")
    with pytest.raises(CheckpointError, match="outside the checkpoint folder"):
        open_source(str(ck))


def test_symlink_loop_is_a_clean_error(tmp_path):
    os.symlink(tmp_path / "b.safetensors", tmp_path / "a.safetensors")
    os.symlink(tmp_path / "a.safetensors", tmp_path / "b.safetensors")
    with pytest.raises(CheckpointError, match="symlink loop"):
        open_source(str(tmp_path))


def test_missing_shard_named_by_index(tmp_path):
    save_file({"a": np.zeros(2, np.float32)}, str(tmp_path / "s1.safetensors"))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}))
    with pytest.raises(CheckpointError, match="s2.safetensors.*missing"):
        open_source(str(tmp_path))


def test_pickle_only_checkpoint_is_refused_not_unpickled(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "pytorch_model.bin").write_bytes(
        b"\x80\x04\x95" + f"cos\nsystem\n(V touch {marker}\ntR.".encode())
    from archprobe.errors import SourceError

    with pytest.raises(SourceError, match="never unpickled"):
        open_source(str(tmp_path))
    assert not marker.exists()
