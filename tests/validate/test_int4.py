"""INT4 pack-quantized weights (compressed-tensors layout): unpacked bit-exactly against the
compressed-tensors library's own packer, and validated end to end against the dense twin."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from archprobe.ops.quant import dequantize_int4_packed
from archprobe.validate import validate

ct = pytest.importorskip("compressed_tensors.compressors.pack_quantized.helpers",
                         reason="compressed-tensors (the packing peer) is installed by `make install`")


def quantize(w: torch.Tensor, group: int = 32):
    out, inp = w.shape
    g = w.float().view(out, inp // group, group)
    scale = g.abs().amax(-1).clamp_min(1e-8) / 7.0
    q = torch.round(g / scale.unsqueeze(-1)).clamp(-8, 7).to(torch.int8).view(out, inp)
    return q, scale


@pytest.mark.parametrize("shape", [(48, 64), (5, 96), (128, 32)])
def test_unpack_matches_the_compressed_tensors_packer(shape):
    torch.manual_seed(0)
    w = torch.randn(*shape)
    q, scale = quantize(w)
    packed = ct.pack_to_int32(q, 4)
    got = dequantize_int4_packed(packed, scale, shape, dtype=torch.float32)
    expected = q.float() * scale.repeat_interleave(32, dim=1)
    assert torch.equal(got, expected)
    assert torch.equal(ct.unpack_from_int32(packed, 4, torch.Size(shape)), q)


def test_zero_point_and_bad_shapes():
    q = torch.randint(-8, 8, (4, 32), dtype=torch.int8)
    scale = torch.rand(4, 1) + 0.1
    zp = torch.randint(-2, 3, (4, 1))
    got = dequantize_int4_packed(ct.pack_to_int32(q, 4), scale, (4, 32), zero_point=zp, dtype=torch.float32)
    assert torch.allclose(got, (q.float() - zp.float()) * scale)
    with pytest.raises(ValueError):
        dequantize_int4_packed(torch.zeros(4, 2, dtype=torch.int32), scale, (4, 32))


def _phi3():
    from transformers import Phi3Config

    return Phi3Config(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0,
                      bos_token_id=1, eos_token_id=2)


@pytest.mark.needs_transformers
@pytest.mark.parametrize("family,quantized", [
    ("llama", (".mlp.",)),
    # Phi-3 stores q | k | v and gate | up fused: a quantized fused tensor is split once it is dequantized
    ("phi3", (".mlp.", ".self_attn.")),
])
def test_int4_checkpoint_validates_like_its_dense_twin(tmp_path, family, quantized):
    from tests.support.tiny_models import build

    build(_phi3() if family == "phi3" else family, tmp_path / "src")
    state = load_file(str(tmp_path / "src" / "model.safetensors"))
    packed_state, dense_state = {}, {}
    for name, t in state.items():
        if any(part in name for part in quantized) and name.endswith(".weight"):
            q, scale = quantize(t)
            base = name[: -len(".weight")]
            packed_state[base + ".weight_packed"] = ct.pack_to_int32(q, 4)
            packed_state[base + ".weight_scale"] = scale.to(torch.bfloat16)
            packed_state[base + ".weight_shape"] = torch.tensor(list(t.shape), dtype=torch.int32)
            dense_state[name] = q.float() * scale.to(torch.bfloat16).float().repeat_interleave(32, dim=1)
        else:
            packed_state[name] = dense_state[name] = t
    for folder, st in (("int4", packed_state), ("dense", dense_state)):
        (tmp_path / folder).mkdir()
        shutil.copy(tmp_path / "src" / "config.json", tmp_path / folder / "config.json")
        save_file(st, str(tmp_path / folder / "model.safetensors"))
    cfg = json.loads((tmp_path / "int4" / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "format": "pack-quantized"}
    (tmp_path / "int4" / "config.json").write_text(json.dumps(cfg))
    ids = [5, 17, 3, 99, 42]
    a = validate(str(tmp_path / "int4"), prompt_ids=ids, save_logits=str(tmp_path / "a.safetensors"))
    b = validate(str(tmp_path / "dense"), prompt_ids=ids, save_logits=str(tmp_path / "b.safetensors"))
    assert a["status"] == b["status"] == "ran" and a["unmapped_tensors"] == [], a.get("reasons") or a.get("problems")
    assert torch.equal(load_file(str(tmp_path / "a.safetensors"))["logits"],
                       load_file(str(tmp_path / "b.safetensors"))["logits"])
