"""`diff_sources` takes what Python code holds: a str or a PathLike (pathlib.Path), for a folder, a single
.safetensors or .gguf file, and a missing path (a one-line SourceError, not a TypeError)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archprobe.demo import demo_checkpoint
from archprobe.diff.headers import diff_sources
from archprobe.errors import SourceError
from tests.support.gguf_files import write_tiny_gguf


def test_a_gguf_file_as_a_path_is_the_same_diff_as_its_str(tmp_path):
    path = tmp_path / "m.gguf"
    write_tiny_gguf(path)
    doc = diff_sources(path, path)
    assert doc["identical"] and doc == diff_sources(str(path), str(path))
    assert doc["a"]["model_type"] == "llama"


def test_a_folder_and_a_safetensors_file_as_paths(tmp_path):
    folder = Path(demo_checkpoint())
    shard = sorted(folder.glob("*.safetensors"))[0]
    assert diff_sources(folder, str(folder))["identical"]
    assert diff_sources(shard, shard) == diff_sources(str(shard), str(shard))


def test_a_missing_path_is_a_source_error(tmp_path):
    with pytest.raises(SourceError):
        diff_sources(tmp_path / "nope", tmp_path / "nope.gguf")
