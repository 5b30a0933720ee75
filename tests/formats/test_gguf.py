"""GGUF files written with the gguf package: read from the header, types map to parameters."""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from archprobe.errors import CheckpointError  # noqa: E402
from archprobe.structure.inspect import inspect_checkpoint  # noqa: E402


def _write(path, quant=gguf.GGMLQuantizationType.Q8_0):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_embedding_length(64)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_context_length(512)
    w.add_feed_forward_length(128)
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.standard_normal((256, 64)).astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(64, np.float32))
    w.add_tensor("output.weight", rng.standard_normal((256, 64)).astype(np.float16))
    for i in range(2):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(64, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(64, np.float32))
        for name, shape in (("attn_q", (64, 64)), ("attn_k", (32, 64)), ("attn_v", (32, 64)),
                            ("attn_output", (64, 64)), ("ffn_gate", (128, 64)), ("ffn_up", (128, 64)),
                            ("ffn_down", (64, 128))):
            q = gguf.quants.quantize(rng.standard_normal(shape).astype(np.float32), quant)
            w.add_tensor(p + name + ".weight", q, raw_shape=q.shape, raw_dtype=quant)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    per_layer = 64 * 64 * 2 + 32 * 64 * 2 + 128 * 64 * 3 + 64 * 2
    return 256 * 64 * 2 + 64 + 2 * per_layer


def test_gguf_structure_and_params(tmp_path):
    expected = _write(tmp_path / "m.gguf")
    doc = inspect_checkpoint(str(tmp_path / "m.gguf"))
    assert doc["source"]["kind"] == "gguf"
    assert doc["params"]["total"] == expected
    assert [(layer["mixer"], layer["ffn"]) for layer in doc["layers"]] == [("gqa", "dense")] * 2
    feats = {f["id"]: f for f in doc["features"]}
    assert feats["attention.gqa"]["attrs"]["num_kv_heads"] == 2
    q = feats["quant.gguf_q8_0"]
    assert q["attrs"]["tensors"] == 14 and q["attrs"]["group_size"] == 32 and q["attrs"]["bits"] == 8.5
    assert q["evidence"][0]["tensor"].startswith("blk.")  # the file's own tensor names
    assert doc["storage"]["header_bytes_read"] < doc["storage"]["bytes"]


def test_truncated_gguf_is_a_clean_error(tmp_path):
    _write(tmp_path / "m.gguf")
    raw = (tmp_path / "m.gguf").read_bytes()
    (tmp_path / "bad.gguf").write_bytes(raw[:100])
    with pytest.raises(CheckpointError, match="bad.gguf"):
        inspect_checkpoint(str(tmp_path / "bad.gguf"))
