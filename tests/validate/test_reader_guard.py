"""validate's tensor reader opens a shard only if it is still a regular file inside the folder when the
data is read (the headers were checked earlier; a shard swapped for a FIFO or a link out since then must
not hang the run or read outside)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from safetensors.numpy import save_file

pytest.importorskip("torch")

from archprobe.errors import CheckpointError, SourceError  # noqa: E402
from archprobe.formats.sources import open_source  # noqa: E402
from archprobe.validate.load import TensorReader  # noqa: E402


def _reader(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    save_file({"w": np.ones((2, 2), np.float32)}, str(folder / "model.safetensors"))
    raw = open_source(str(folder))
    return folder, TensorReader(str(folder), raw.headers)


def test_reads_a_regular_shard(tmp_path):
    _, reader = _reader(tmp_path)
    with reader.session() as get:
        assert get("w").sum().item() == 4


@pytest.mark.parametrize("swap", ["fifo", "link_out"])
def test_a_shard_swapped_after_the_headers_is_refused(tmp_path, swap):
    folder, reader = _reader(tmp_path)
    shard = folder / "model.safetensors"
    shard.unlink()
    if swap == "fifo":
        os.mkfifo(shard)
    else:
        outside = tmp_path / "outside.safetensors"
        save_file({"w": np.zeros((2, 2), np.float32)}, str(outside))
        shard.symlink_to(outside)
    with reader.session() as get, pytest.raises(CheckpointError):
        get("w")


def test_a_tensor_read_past_the_deadline_ends_in_one_error(tmp_path, monkeypatch):
    """A read slower than ARCHPROBE_DEADLINE_S (here: 64 MB against 0.1 ms) stops with SourceError naming
    the shard and the tensor, which the CLI prints as one line (exit 2)."""
    folder = tmp_path / "big"
    folder.mkdir()
    save_file({"big": np.zeros((4096, 4096), np.float32)}, str(folder / "model.safetensors"))
    reader = TensorReader(str(folder), open_source(str(folder)).headers)
    monkeypatch.setenv("ARCHPROBE_DEADLINE_S", "0.0001")
    with reader.session() as get, pytest.raises(SourceError, match="tensor 'big'.*gave up after"):
        get("big")
    monkeypatch.delenv("ARCHPROBE_DEADLINE_S")
    with reader.session() as get:
        assert get("big").shape == (4096, 4096)
