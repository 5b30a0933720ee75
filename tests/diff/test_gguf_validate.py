"""validate on a real GGUF model: archprobe's own dequantization and name mapping give the logits
transformers computes after loading the same file with `gguf_file=`."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from archprobe.validate import validate
from tests.support import real_models

IDS = [1, 2, 3, 4, 5, 6, 7, 8]


@pytest.fixture(scope="module")
def hf_gguf():
    """transformers' model from the same GGUF file (its own dequantizer and reverse permutation)."""
    from transformers import AutoModelForCausalLM

    path = real_models.smollm2_gguf()
    return AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                dtype=torch.float32).eval()


def test_real_gguf_tensors_dequantize_as_gguf_quants_does():
    from gguf import GGUFReader
    from gguf.quants import dequantize as reference

    from archprobe.validate.load import load

    path = real_models.smollm2_gguf()
    loaded = load(path)
    seen = set()
    by_name = {t.name: t for t in GGUFReader(path).tensors}
    with loaded.reader.session() as get:
        for name in ("blk.3.ffn_down.weight", "token_embd.weight", "blk.0.attn_norm.weight", "blk.2.attn_v.weight"):
            t = by_name[name]
            want = reference(t.data, t.tensor_type).reshape(loaded.reader.shape(name))
            got = get(name).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
            seen.add(t.tensor_type.name)
    assert {"Q4_1", "Q8_0", "F32"} <= seen   # every type the packaged model uses


def test_real_gguf_validate_matches_transformers_gguf_loader(tmp_path, hf_gguf):
    path = real_models.smollm2_gguf()
    out = tmp_path / "logits.safetensors"
    doc = validate(path, IDS, reference="none", save_logits=str(out))
    assert doc["status"] == "ran", doc     # no reference inside validate: the test compares
    assert doc["mapped_tensors"] == 272 and not doc["missing_tensors"]
    from safetensors.torch import load_file

    ours = load_file(str(out))["logits"].double()
    with torch.no_grad():
        theirs = hf_gguf(torch.tensor([IDS]), use_cache=False).logits.double()
    rel = (ours - theirs).abs().max() / theirs.abs().max()
    lp, lq = torch.log_softmax(theirs, -1), torch.log_softmax(ours, -1)
    kl = (lp.exp() * (lp - lq)).sum(-1).mean()
    assert rel <= 1e-4, rel
    assert kl <= 1e-6, kl


def test_gguf_q_k_rows_are_unpermuted_for_llama(hf_gguf):
    """A wrong (missing) un-permutation would still run but give other logits: check the rows directly
    against transformers' own reversed weights."""
    from archprobe.validate.load import load

    path = real_models.smollm2_gguf()
    ref = hf_gguf
    loaded = load(path)
    with loaded.reader.session() as get:
        for ours, theirs in (("blk.1.attn_q.weight", "model.layers.1.self_attn.q_proj.weight"),
                             ("blk.1.attn_k.weight", "model.layers.1.self_attn.k_proj.weight")):
            w = dict(ref.named_parameters())[theirs].detach()
            assert torch.equal(get(ours), w), ours
