"""Hostile local checkpoints through the real CLI (a child process): shape and array bombs, FIFOs,
symlinks out of the folder, JSON traps, repeated tensor names, injection in names. Every case must
exit 0 or 2 with at most one line on stderr, no traceback, within the RSS and time bounds."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.support.cli import assert_bounded, run_cli


def raw_safetensors(path, header: dict | bytes, data: bytes = b"") -> None:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def good_folder(folder, config: dict | None = None, names=("model.layers.0.mlp.up_proj.weight",)):
    folder.mkdir(parents=True, exist_ok=True)
    save_file({n: np.zeros((4, 4), np.float32) for n in names}, str(folder / "model.safetensors"))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("shape", [[300000000, [0]], [1e19, "a"], [2**62, 2**62, 2**62], [-1, -1],
                                   [1] * 100000, [[[[]]]], "abc", None])
def test_shape_bombs_are_refused_cheaply(tmp_path, shape):
    raw_safetensors(tmp_path / "m.safetensors", {"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}})
    r = run_cli("inspect", str(tmp_path / "m.safetensors"), "--json")
    assert_bounded(r, ok=False, contains="m.safetensors", rss=300 * 2**20, wall_s=20)


def test_gguf_array_of_2_28_items_is_walked_not_materialised(tmp_path):
    """A sparse 256 MB GGUF whose metadata is one u8 array of 2^28 zero items (it cost 4.4 GB once)."""
    n = 1 << 28
    key = b"general.evil"
    head = (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
            + struct.pack("<IIQ", 9, 0, n))
    path = tmp_path / "m.gguf"
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(len(head) + n)
    r = run_cli("inspect", str(path), "--json")
    assert_bounded(r, rss=300 * 2**20, wall_s=20)


@pytest.mark.parametrize("counts", [(1 << 40, 0), (0, 1 << 40), (1 << 24, 0)])
def test_gguf_counts_are_capped_before_use(tmp_path, counts):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, *counts) + b"\0" * 64)
    assert_bounded(run_cli("inspect", str(path), "--json"), ok=False, rss=300 * 2**20, wall_s=20)


@pytest.mark.parametrize("name", ["x.gguf", "model.safetensors", "config.json", "model.safetensors.index.json"])
def test_a_fifo_is_refused_not_waited_on(tmp_path, name):
    folder = tmp_path / "ckpt"
    if name in ("x.gguf", "model.safetensors"):
        folder.mkdir()          # the FIFO is the only weights file
    else:
        good_folder(folder)     # a real shard beside a FIFO config or index
    os.mkfifo(folder / name)
    r = run_cli("inspect", str(folder), "--json", timeout=60)
    assert_bounded(r, ok=False, contains="not a regular file", wall_s=20)


def test_shards_and_ggufs_symlinked_out_of_the_folder_are_refused(tmp_path):
    outside = good_folder(tmp_path / "outside")
    folder = tmp_path / "ckpt"
    folder.mkdir()
    os.symlink(outside / "model.safetensors", folder / "model.safetensors")
    assert_bounded(run_cli("inspect", str(folder), "--json"), ok=False, contains="outside the checkpoint folder")
    gfolder = tmp_path / "g"
    gfolder.mkdir()
    (tmp_path / "real.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
    os.symlink(tmp_path / "real.gguf", gfolder / "x.gguf")
    assert_bounded(run_cli("inspect", str(gfolder), "--json"), ok=False, contains="outside the checkpoint folder")


@pytest.mark.parametrize("config", [b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}", b'{"num_hidden_layers": NaN}',
                                    b'{"hidden_size": 1e400}', b'{"num_hidden_layers": 2, "num_hidden_layers": 90}',
                                    b'{"vocab_size": ' + b"9" * 5000 + b"}", b"\xff\xfe", b"[1, 2]"])
def test_config_json_traps(tmp_path, config):
    folder = good_folder(tmp_path / "ckpt")
    (folder / "config.json").write_bytes(config)
    assert_bounded(run_cli("inspect", str(folder), "--json"), ok=False, contains="config.json")


def test_index_paths_leaving_the_folder_are_refused(tmp_path):
    folder = good_folder(tmp_path / "ckpt")
    for bad in ("../outside.safetensors", "/etc/passwd.safetensors", "a\\..\\b.safetensors", "x\0.safetensors"):
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": bad}}))
        assert_bounded(run_cli("inspect", str(folder), "--json"), ok=False, contains="weight_map names shard")


@pytest.mark.parametrize("name", ["model.norm.weight", "model.layers.0.mlp.experts.0.w1.weight"])
def test_one_tensor_name_in_many_shards_is_not_many_tensors(tmp_path, name):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    for i in range(200):
        save_file({name: np.zeros((2,), np.float32)}, str(folder / f"s{i:04d}.safetensors"))
    r = run_cli("inspect", str(folder), "--json")
    assert_bounded(r, ok=False, contains="shard")


def test_markup_and_escapes_in_names_stay_text(tmp_path):
    payload = "[/][bold red]x\x1b[2J<script>alert(1)</script>"
    folder = good_folder(tmp_path / "ck[/]pt\x1b[2J", {"model_type": payload, "architectures": [payload],
                                                        "torch_dtype": payload},
                         names=(f"model.layers.0.{payload}.weight", "model.embed_tokens.weight"))
    r = run_cli("inspect", str(folder))
    assert_bounded(r, ok=True)
    assert "[/][bold red]x\\x1b[2J" in r.stdout      # shown literally, the escape made visible
    # the report writers get the same strings: tests/hostile/test_output_safety.py


def test_huge_declared_header_is_refused_unread(tmp_path):
    p = tmp_path / "m.safetensors"
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", 90 * 2**20) + b"{")
        f.truncate(8 + 90 * 2**20)      # sparse: claims a 90 MB header of zero bytes
    r = run_cli("inspect", str(p), "--json", env={"ARCHPROBE_MAX_HEADER_BYTES": str(2**20)})
    assert_bounded(r, ok=False, contains="cap", rss=300 * 2**20)


def test_repeated_names_stop_at_the_second_shard(tmp_path):
    """The duplicate is found as headers arrive, so a flood of shards is not read to the end."""
    from archprobe.errors import CheckpointError
    from archprobe.formats.sources import open_source

    folder = tmp_path / "ckpt"
    folder.mkdir()
    for i in range(3):
        save_file({"model.norm.weight": np.zeros((2,), np.float32)}, str(folder / f"s{i}.safetensors"))
    (folder / "s2.safetensors").write_bytes(b"not a safetensors file")   # never reached
    with pytest.raises(CheckpointError, match="in two shards"):
        open_source(str(folder))


def test_a_sparse_gguf_walking_millions_of_strings_stops_at_the_deadline(tmp_path):
    """A 256 MB sparse GGUF: a tokenizer array of 2^25 strings, every one empty (its zero bytes are the
    lengths), walked one by one. The command's reading deadline (3 s here) stops it, local file or not."""
    n = 1 << 25
    key = b"tokenizer.ggml.tokens"
    head = (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
            + struct.pack("<IIQ", 9, 8, n))
    path = tmp_path / "m.gguf"
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(len(head) + 8 * n)
    r = run_cli("inspect", str(path), "--json", env={"ARCHPROBE_DEADLINE_S": "3"})
    assert_bounded(r, ok=False, contains="deadline", rss=300 * 2**20, wall_s=15)


def test_a_huge_sparse_safetensors_is_read_no_further_than_its_header(tmp_path):
    """A 1 TB sparse safetensors file: only the header is read, well inside the deadline."""
    entry = {"dtype": "F32", "shape": [1 << 38], "data_offsets": [0, 1 << 40]}
    raw_safetensors(tmp_path / "model.safetensors", {"w": entry})
    with open(tmp_path / "model.safetensors", "r+b") as f:
        f.truncate(f.seek(0, 2) + (1 << 40))
    r = run_cli("inspect", str(tmp_path), "--json", env={"ARCHPROBE_DEADLINE_S": "5"})
    assert_bounded(r, ok=True, rss=300 * 2**20, wall_s=15)
