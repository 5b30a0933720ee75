"""archprobe's ggml dequantization against the `gguf` package's `quants` module (the independent one)."""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import quants  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType  # noqa: E402

from archprobe.ops.gguf_quant import UnsupportedQuant, dequantize  # noqa: E402

# byte offsets of the float16 fields of each block (random bytes there could be NaN/inf)
F16_FIELDS = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q2_K": [80, 82],
              "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}
QUANTIZABLE = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]


def _random_blocks(name: str, n_blocks: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[name]]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for at in F16_FIELDS.get(name, []):
        raw[:, at:at + 2] = rng.normal(0, 0.05, n_blocks).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    if name == "Q8_K":
        raw[:, :4] = rng.normal(0, 0.05, n_blocks).astype(np.float32).view(np.uint8).reshape(n_blocks, 4)
    return raw


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
                                  "Q6_K", "MXFP4", "NVFP4"])
def test_random_blocks_equal_gguf_quants(name):
    raw = _random_blocks(name, 64, seed=len(name))
    want = quants.dequantize(raw, GGMLQuantizationType[name]).reshape(-1)
    got = dequantize(raw.tobytes(), name)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", QUANTIZABLE + ["BF16", "F16"])
def test_data_written_by_gguf_quantize(name):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 256)).astype(np.float32) * 0.02
    qtype = GGMLQuantizationType[name]
    packed = quants.quantize(x, qtype)
    want = quants.dequantize(packed, qtype)
    got = dequantize(packed.tobytes(), name, (8, 256))
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6, atol=1e-8)
    if name != "Q4_0":   # and the values are near the input (a layout mix-up would not be)
        assert np.abs(got - x).max() < 0.3 * np.abs(x).max()


def test_nvfp4_quantized_by_gguf():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 128)).astype(np.float32)
    try:
        packed = quants.quantize(x, GGMLQuantizationType.NVFP4)
    except (NotImplementedError, quants.QuantError):
        pytest.skip("this gguf version cannot quantize NVFP4")
    want = quants.dequantize(packed, GGMLQuantizationType.NVFP4)
    np.testing.assert_allclose(dequantize(packed.tobytes(), "NVFP4", (4, 128)), want, rtol=1e-6, atol=1e-7)


def test_unsupported_type_is_one_error():
    with pytest.raises(UnsupportedQuant, match="IQ2_XXS"):
        dequantize(b"\0" * 66, "IQ2_XXS")
