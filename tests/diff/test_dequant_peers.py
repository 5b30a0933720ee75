"""archprobe's dequantization against independent ones: compressed-tensors' own compressors (pack-quantized
INT4, symmetric and asymmetric; NVFP4; MXFP4) pack the weights and decompress them, and every ggml type of
the real packaged GGUF models decodes as the `gguf` package's `quants` module decodes it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from archprobe.ops.quant import dequantize_int4_packed, dequantize_mxfp4, dequantize_nvfp4

ct_scheme = pytest.importorskip("compressed_tensors.quantization.quant_scheme")
from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor  # noqa: E402
from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor  # noqa: E402
from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8  # noqa: E402
from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor  # noqa: E402
from compressed_tensors.quantization.lifecycle.forward import dequantize as ct_dequantize  # noqa: E402


def _scheme(name: str):
    return ct_scheme.preset_name_to_scheme(name, ["Linear"])


def _weights(out: int, inp: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(out, inp, generator=g) * 0.05


@pytest.mark.parametrize("shape", [(48, 256), (13, 128)])
@pytest.mark.parametrize("preset", ["W4A16", "W4A16_ASYM"])
def test_int4_pack_quantized_equals_compressed_tensors_decompression(shape, preset):
    scheme = _scheme(preset)
    group = scheme.weights.group_size
    w = _weights(*shape, seed=shape[0])
    grouped = w.view(shape[0], -1, group)
    state = {"weight": w, "weight_shape": torch.tensor(shape)}
    if scheme.weights.symmetric:
        state["weight_scale"] = grouped.abs().amax(-1) / 7.0
    else:
        lo, hi = grouped.amin(-1), grouped.amax(-1)
        state["weight_scale"] = (hi - lo) / 15.0
        state["weight_zero_point"] = (-8 - torch.round(lo / state["weight_scale"])).clamp(-8, 7).to(torch.int8)
    packed = PackedQuantizationCompressor.compress(dict(state), scheme)
    theirs = PackedQuantizationCompressor.decompress(dict(packed), scheme)["weight"].float()
    zp = packed.get("weight_zero_point")
    assert zp is None or (zp.dtype == torch.int32 and zp.shape[0] == -(-shape[0] // 8))   # packed along rows
    ours = dequantize_int4_packed(packed["weight_packed"], packed["weight_scale"], packed["weight_shape"].tolist(),
                                  zero_point=zp, dtype=torch.float32)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-8)
    assert (ours - w).abs().max() < 0.6 * state["weight_scale"].max()   # and it is the weight, quantized


@pytest.mark.parametrize("shape", [(32, 128), (7, 64)])
def test_nvfp4_equals_compressed_tensors_decompression(shape):
    scheme = _scheme("NVFP4A16")
    w = _weights(*shape, seed=3)
    global_scale = torch.tensor([448.0 * 6.0 / w.abs().max().item()])
    local = w.view(shape[0], -1, 16).abs().amax(-1) / 6.0
    scale = (local * global_scale).to(torch.float8_e4m3fn).float() / global_scale   # representable after storing
    state = {"weight": w, "weight_scale": scale * global_scale, "weight_global_scale": global_scale}
    packed = NVFP4PackedCompressor.compress(dict(state), scheme)
    assert packed["weight_packed"].dtype == torch.uint8 and packed["weight_scale"].dtype == torch.float8_e4m3fn
    ours = dequantize_nvfp4(packed["weight_packed"], packed["weight_scale"], packed["weight_global_scale"],
                            dtype=torch.float32)
    # the library's decompression, in float32 (its decompress() works in bfloat16: compared below)
    codes = unpack_fp4_from_uint8(packed["weight_packed"], *shape, dtype=torch.float32)
    theirs = ct_dequantize(x_q=codes, scale=packed["weight_scale"].float(), args=scheme.weights,
                           global_scale=packed["weight_global_scale"], dtype=torch.float32)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-8)
    bf16 = NVFP4PackedCompressor.decompress(dict(packed), scheme)["weight"]
    torch.testing.assert_close(ours.to(bf16.dtype), bf16, rtol=1e-2, atol=1e-6)
    assert (ours - w).abs().max() < w.abs().max() / 4


@pytest.mark.parametrize("shape", [(16, 128), (5, 64)])
def test_mxfp4_equals_compressed_tensors_decompression(shape):
    scheme = _scheme("MXFP4A16")
    w = _weights(*shape, seed=5)
    exps = torch.floor(torch.log2(w.view(shape[0], -1, 32).abs().amax(-1) / 6.0)) + 1
    state = {"weight": w, "weight_scale": torch.exp2(exps)}
    packed = MXFP4PackedCompressor.compress(dict(state), scheme)
    assert packed["weight_scale"].dtype == torch.uint8
    ours = dequantize_mxfp4(packed["weight_packed"], packed["weight_scale"], dtype=torch.float32)
    codes = unpack_fp4_from_uint8(packed["weight_packed"], *shape, dtype=torch.float32)
    scale = MXFP4PackedCompressor._decompress_scale(packed["weight_scale"], torch.float32)
    theirs = ct_dequantize(x_q=codes, scale=scale, args=scheme.weights, dtype=torch.float32)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)     # powers of two times E2M1: exact
    bf16 = MXFP4PackedCompressor.decompress(dict(packed), scheme)["weight"]
    torch.testing.assert_close(ours.to(bf16.dtype), bf16, rtol=0, atol=0)


def test_a_packed_zero_point_unpacks_as_compressed_tensors_packs_it():
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32

    from archprobe.ops.quant import unpack_int4_rows

    zp = torch.randint(-8, 8, (19, 3), dtype=torch.int8)
    packed = pack_to_int32(zp, 4, packed_dim=0)
    assert packed.shape == (3, 3)
    assert torch.equal(unpack_int4_rows(packed, 19), zp.to(torch.int32))
    assert unpack_int4_rows(zp, 19) is zp                # already unpacked: as is


def test_nvfp4_refuses_a_scale_of_the_wrong_shape():
    with pytest.raises(ValueError, match="weight_scale"):
        dequantize_nvfp4(torch.zeros(4, 32, dtype=torch.uint8), torch.ones(4, 3), torch.ones(1))


# --- every ggml type the real packaged GGUF models use -----------------------------------------------------
def _real_gguf_files():
    from tests.support import real_models

    out = []
    for name in real_models.available():
        if name in real_models.MODELS:
            out.append(pytest.param(name, id=name))
    return out


@pytest.mark.parametrize("model", _real_gguf_files())
def test_every_type_in_a_real_gguf_decodes_as_gguf_quants(model):
    """The first 16 rows of one tensor of each type (offsets from archprobe's header reader; gguf's own
    GGUFReader, which tests/diff/test_gguf_validate.py uses on SmolLM2, takes 34 s on gemma's vocabulary)."""
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize as reference

    from archprobe.formats.gguf import DATA_OFFSETS
    from archprobe.formats.sources import open_source
    from archprobe.ops.gguf_quant import dequantize
    from tests.support import real_models

    path = real_models.gguf_path(model, real_models.real_root())
    raw = open_source(str(path))
    by_type: dict = {}
    for h in raw.headers:
        for t in h.tensors:
            by_type.setdefault(t.dtype.removeprefix("GGUF_"), (t, h.metadata[DATA_OFFSETS][t.name]))
    with open(path, "rb") as f:
        for name, (t, offset) in by_type.items():
            rows = t.shape[0] if len(t.shape) > 1 else 1
            n = t.nbytes // rows * min(rows, 16)
            f.seek(offset)
            data = np.frombuffer(f.read(n), dtype=np.uint8)
            want = reference(data, GGMLQuantizationType[name]).reshape(-1).astype(np.float32)
            got = dequantize(data.tobytes(), name).reshape(-1)
            assert got.size == want.size > 0
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=f"{model} {name} {t.name}")
    assert len(by_type) >= 3, by_type.keys()
    print(model, sorted(by_type))


def test_mxfp4_equals_transformers_gpt_oss_reference():
    """The MXFP4 reference as gpt-oss ships it (transformers' convert_moe_packed_tensors: blocks
    [E, out, G, 16], E8M0 scales [E, out, G], returned transposed to [E, in, out])."""
    mx = pytest.importorskip("transformers.integrations.mxfp4")
    g = torch.Generator().manual_seed(1)
    blocks = torch.randint(0, 256, (3, 10, 4, 16), generator=g, dtype=torch.uint8)
    scales = torch.randint(115, 135, (3, 10, 4), generator=g, dtype=torch.uint8)
    theirs = mx.convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)
    ours = torch.stack([dequantize_mxfp4(blocks[e].reshape(10, 64), scales[e], dtype=torch.float32)
                        for e in range(3)])
    torch.testing.assert_close(ours.transpose(1, 2), theirs, rtol=0, atol=0)
