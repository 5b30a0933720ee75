"""The lazy validate path (validate/decode.py) at small scale: what benchmarks/validate_k3.py runs on the
full 1.45 TB K3 layout, in seconds.

* On a tiny K3 checkpoint with real random weights (MXFP4 experts really packed), the lazy forward
  equals the eager streamed validate's logits (the fp32 same-algorithm bound; observed bit for bit),
  and token-by-token decoding with the caches equals the full forward by the flash-attention rule: no
  further from a float64 run than 2x the eager float32 path is (this tiny model amplifies float32
  rounding to ~3e-6..1e-5 rel-RMS, measured).
* On a scaled-down K3-shaped sparse checkpoint (real headers, zero data), the bytes read per token
  equal, within 2%, what the token needs counted from the headers by this test (every non-expert
  weight of the text model, the experts the router picked, one embedding row), far below the
  checkpoint; zero data routes deterministically to experts 0..k-1.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import replace

import numpy as np
import pytest
import torch

from archprobe.ops.quant import dequantize_mxfp4
from archprobe.testing import assert_close, compare
from archprobe.writers.synthetic import tiny_k3_dims, write_k3_checkpoint

IDS = [3, 17, 5, 200, 9, 44]


# tiny_k3_dims() with heads x head_dim (128) != hidden (64), as K3 itself has (12288 != 7168). The override
# once kept g_proj and o_proj apart by shape; the card now tells the square pair apart by name
# (tests/structure/test_mla_output_projection.py), and this file passes with the demo dims too. Kept so
# the lazy path also meets a non-square output projection and gate.
TINY = replace(tiny_k3_dims(), head_dim=32, decay_rank=32)   # K3: the decay rank is the head dim


@pytest.fixture(scope="module")
def tiny_real(tmp_path_factory):
    folder = tmp_path_factory.mktemp("k3tiny")
    write_k3_checkpoint(folder, TINY, sparse=False, shards=3)
    return str(folder)


def _eager_logits(folder, ids, tmp_path) -> torch.Tensor:
    from safetensors.torch import load_file

    from archprobe.validate import validate

    path = str(tmp_path / "eager.safetensors")
    doc = validate(folder, prompt_ids=ids, save_logits=path)
    assert doc["status"] == "ran", doc
    return load_file(path)["logits"]


def test_lazy_forward_and_decode_equal_eager(tiny_real, tmp_path):
    from archprobe.validate.decode import LazyModel

    eager = _eager_logits(tiny_real, IDS, tmp_path)
    lazy = LazyModel(tiny_real, stream_min_bytes=0)     # stream every matrix, as at full scale
    precise = LazyModel(tiny_real, dtype=torch.float64, stream_min_bytes=0)
    assert lazy.streamed and lazy.banks, "nothing was streamed: the test would not test the lazy path"
    ids = torch.tensor([IDS])
    full, _ = lazy.forward(ids, all_positions=True)
    ref, _ = precise.forward(ids, all_positions=True)
    assert full.shape == eager.shape
    noise = compare(ref, eager)["rel_rms"]
    assert compare(ref, full)["rel_rms"] <= 2 * noise + 1e-7, (compare(ref, full), noise)
    assert_close("same_algorithm", eager, full, name="lazy vs eager logits")   # observed: 0 (same kernels)
    assert (full.argmax(-1) == eager.argmax(-1)).all()

    # the decode: 2-token prefill, then one token at a time with the KDA states and MLA latent caches
    logits, caches = lazy.forward(ids[:, :2])
    steps = [logits[0, -1]]
    for k in range(2, len(IDS)):
        logits, caches = lazy.forward(ids[:, k:k + 1], caches, start=k)
        steps.append(logits[0, -1])
    incremental = torch.stack(steps)
    assert compare(ref[0, 1:], incremental)["rel_rms"] <= 2 * noise + 1e-7
    assert compare(full[0, 1:], incremental)["rel_rms"] <= 3 * noise + 1e-7
    kinds = {type(c).__name__ for c in caches if c is not None}
    assert kinds == {"KDACache", "MLACache"}
    assert max(c.length for c in caches if type(c).__name__ == "MLACache") == len(IDS)

    records = lazy.generate(IDS[:3], 3)
    assert [r["input"] for r in records][1:] == [[r["next_token"]] for r in records[:-1]]
    assert all(r["finite"] for r in records)


def _headers(folder) -> dict[str, tuple[str, list[int], int]]:
    """name -> (dtype, shape, bytes), read here with struct + json (not through the code under test)."""
    out = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            with open(os.path.join(folder, f), "rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                doc = json.loads(fh.read(n))
            doc.pop("__metadata__", None)
            out.update({k: (v["dtype"], v["shape"], v["data_offsets"][1] - v["data_offsets"][0])
                        for k, v in doc.items()})
    return out


# widths kept distinct from each other as in K3 (latent != heads x head_dim != hidden), so the card's
# shape-first binding has no ties; 256 experts of which 2 are routed
SMALL_K3 = replace(TINY, num_layers=5, hidden=128, vocab=2048, heads=4, head_dim=48, decay_rank=48, experts=256,
                   top_k=2, expert_width=128, latent=64, dense_width=256)


def test_sparse_k3_shape_reads_what_the_token_needs(tmp_path):
    from archprobe.validate.decode import LazyModel

    write_k3_checkpoint(tmp_path, SMALL_K3, sparse=True, shards=4)
    headers = _headers(tmp_path)
    text = {k: v for k, v in headers.items() if k.startswith("language_model.")}
    total = sum(v[2] for v in headers.values())
    embed = "language_model.model.embed_tokens.weight"
    non_expert = sum(v[2] for k, v in text.items() if ".experts." not in k and k != embed)
    row = text[embed][2] // text[embed][1][0]

    def expert_bytes(layer: int, e: int) -> int:
        head = f"language_model.model.layers.{layer}.block_sparse_moe.experts.{e}."
        found = [v[2] for k, v in text.items() if k.startswith(head)]
        assert len(found) == 6          # w1, w2, w3 packed + scale
        return sum(found)

    model = LazyModel(str(tmp_path), stream_min_bytes=0)
    build_read = model.reader.bytes_read
    records = model.generate([7], 2)
    k = SMALL_K3.top_k
    for r in records:
        assert r["finite"]
        assert set(r["experts"]) == set(range(1, SMALL_K3.num_layers))
        assert all(v == list(range(k)) for v in r["experts"].values()), r["experts"]   # zero data: ties -> 0..k-1
        routed = sum(expert_bytes(i, e) for i, es in r["experts"].items() for e in es)
        need = non_expert + routed + row
        read = r["bytes_read"] + (build_read if r["step"] == 0 else 0)
        if r["step"] == 0:
            assert need <= read <= 1.02 * need, (read, need)
        else:   # small tensors stay resident: read at build only
            assert need - build_read <= read <= 1.02 * need, (read, need, build_read)
        assert read < total / 5
    # no expert that was not routed was read: the routed ones alone fill the 2% margin several times
    assert 1.02 * (non_expert + row) < non_expert + row + expert_bytes(1, 0) * k * (SMALL_K3.num_layers - 1)


def test_stable_choice_ties_and_distinct_scores():
    from archprobe.validate.lazy_experts import stable_choice

    ties = torch.full((3, 10), 0.5)
    assert stable_choice(ties, 4).tolist() == [[0, 1, 2, 3]] * 3
    distinct = torch.randn(5, 32, generator=torch.Generator().manual_seed(0))
    assert torch.equal(stable_choice(distinct, 6), distinct.topk(6, dim=-1, sorted=True).indices)


def test_streamed_matmuls_equal_dense_ones(tmp_path, monkeypatch):
    from safetensors.torch import save_file

    from archprobe.validate import streamed_matmul
    from archprobe.validate.lazy_io import ByteReader, ShardIndex

    gen = torch.Generator().manual_seed(1)
    rng = np.random.default_rng(1)
    packed = torch.from_numpy(rng.integers(0, 256, (37, 48), dtype=np.uint8))
    scale = torch.from_numpy(rng.integers(118, 134, (37, 3), dtype=np.uint8))
    w = torch.randn(29, 96, generator=gen).to(torch.bfloat16)
    save_file({"w": w, "p": packed, "s": scale}, str(tmp_path / "m.safetensors"))
    monkeypatch.setattr(streamed_matmul, "CHUNK_ELEMENTS", 500)    # several chunks and a short last one
    reader = ByteReader(ShardIndex(str(tmp_path), ["m.safetensors"]))
    x = torch.randn(3, 96, generator=gen)
    got = streamed_matmul.mxfp4_matmul(x, reader, "p", "s")
    assert compare(x @ dequantize_mxfp4(packed, scale, dtype=torch.float32).T, got)["rel_rms"] < 1e-6
    assert compare(x @ w.float().T, streamed_matmul.dense_matmul(x, reader, "w"))["rel_rms"] < 1e-6
    assert reader.bytes_read == packed.numel() + scale.numel() + w.numel() * 2
