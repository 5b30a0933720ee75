"""A tiny llama whose MLP weights compressed-tensors packs (asymmetric INT4 pack-quantized, NVFP4) validates
to the same logits as its dense twin, whose weights are compressed-tensors' own decompression of those
packs: validate reads the quantized formats as the library that writes them does."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from archprobe.validate import validate

pytest.importorskip("compressed_tensors")
pytestmark = pytest.mark.needs_transformers

IDS = [5, 17, 3, 99, 42]


def _int4_asym(w: torch.Tensor):
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor as C
    from compressed_tensors.quantization.quant_scheme import preset_name_to_scheme

    scheme = preset_name_to_scheme("W4A16_ASYM", ["Linear"])
    group = scheme.weights.group_size if w.shape[1] % scheme.weights.group_size == 0 else 32
    scheme.weights.group_size = group
    g = w.float().view(w.shape[0], -1, group)
    lo, hi = g.amin(-1), g.amax(-1)
    scale = ((hi - lo) / 15.0).clamp_min(1e-8)
    state = {"weight": w.float(), "weight_scale": scale, "weight_shape": torch.tensor(list(w.shape)),
             "weight_zero_point": (-8 - torch.round(lo / scale)).clamp(-8, 7).to(torch.int8)}
    packed = C.compress(dict(state), scheme)
    dense = C.decompress(dict(packed), scheme)["weight"].float()
    return {k: v for k, v in packed.items() if k != "weight"}, dense, {"format": "pack-quantized"}


def _nvfp4(w: torch.Tensor):
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor as C
    from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8
    from compressed_tensors.quantization.lifecycle.forward import dequantize
    from compressed_tensors.quantization.quant_scheme import preset_name_to_scheme

    scheme = preset_name_to_scheme("NVFP4A16", ["Linear"])
    w = w.float()
    global_scale = torch.tensor([448.0 * 6.0 / w.abs().max().item()])
    local = w.view(w.shape[0], -1, 16).abs().amax(-1) / 6.0
    packed = C.compress({"weight": w, "weight_scale": (local * global_scale).to(torch.float8_e4m3fn).float(),
                         "weight_global_scale": global_scale}, scheme)
    codes = unpack_fp4_from_uint8(packed["weight_packed"], *w.shape, dtype=torch.float32)
    dense = dequantize(x_q=codes, scale=packed["weight_scale"].float(), args=scheme.weights,
                       global_scale=packed["weight_global_scale"], dtype=torch.float32)
    return {k: v for k, v in packed.items() if k != "weight"}, dense, {"format": "nvfp4-pack-quantized"}


@pytest.mark.parametrize("pack", [_int4_asym, _nvfp4], ids=["int4-asym", "nvfp4"])
def test_a_quantized_checkpoint_validates_like_its_decompressed_twin(tmp_path, pack):
    from tests.support.tiny_models import build

    build("llama", tmp_path / "src")
    state = load_file(str(tmp_path / "src" / "model.safetensors"))
    packed_state, dense_state = {}, {}
    qcfg = None
    for name, t in state.items():
        if ".mlp." in name and name.endswith(".weight"):
            parts, dense, qcfg = pack(t)
            base = name[: -len(".weight")]
            packed_state |= {f"{base}.{k}": v.contiguous() for k, v in parts.items()}
            dense_state[name] = dense.contiguous()
        else:
            packed_state[name] = dense_state[name] = t.float().contiguous()
    for folder, st in (("packed", packed_state), ("dense", dense_state)):
        (tmp_path / folder).mkdir()
        shutil.copy(tmp_path / "src" / "config.json", tmp_path / folder / "config.json")
        save_file(st, str(tmp_path / folder / "model.safetensors"))
    cfg = json.loads((tmp_path / "packed" / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", **qcfg}
    (tmp_path / "packed" / "config.json").write_text(json.dumps(cfg))
    a = validate(str(tmp_path / "packed"), prompt_ids=IDS, save_logits=str(tmp_path / "a.safetensors"))
    b = validate(str(tmp_path / "dense"), prompt_ids=IDS, save_logits=str(tmp_path / "b.safetensors"))
    assert a["status"] == b["status"] == "ran" and a["unmapped_tensors"] == [], a
    la, lb = (load_file(str(tmp_path / f"{x}.safetensors"))["logits"] for x in "ab")
    torch.testing.assert_close(la, lb, rtol=1e-5, atol=1e-5)
    assert not torch.equal(la, _dense_logits(tmp_path, state))   # the quantization did change the model


def _dense_logits(tmp_path, state):
    (tmp_path / "orig").mkdir()
    shutil.copy(tmp_path / "src" / "config.json", tmp_path / "orig" / "config.json")
    save_file({k: v.float().contiguous() for k, v in state.items()}, str(tmp_path / "orig" / "model.safetensors"))
    validate(str(tmp_path / "orig"), prompt_ids=IDS, save_logits=str(tmp_path / "o.safetensors"))
    return load_file(str(tmp_path / "o.safetensors"))["logits"]
