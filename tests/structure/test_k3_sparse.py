"""The full K3 inventory as a sparse checkpoint (real headers, data regions left as holes)."""

from __future__ import annotations

import os

from archprobe.structure.inspect import inspect_checkpoint


def test_k3_structure_params_and_features(k3_sparse):
    doc = inspect_checkpoint(k3_sparse)
    a = doc["architecture"]
    assert (a["num_layers"], a["hidden_size"], a["num_experts"], a["top_k"]) == (93, 7168, 896, 16)
    assert a["mixers"] == {"kda": 69, "mla": 24}
    assert a["ffns"] == {"dense": 1, "latent_moe": 92}
    mla_layers = [i for i, layer in enumerate(doc["layers"]) if layer["mixer"] == "mla"]
    assert mla_layers == [*range(3, 92, 4), 92]
    assert doc["params"]["total"] == 2_779_931_837_184       # raw element count would be 1,503,647,073,024
    assert abs(doc["params"]["active"] - 105.4e9) < 0.05e9
    feats = {f["id"]: f for f in doc["features"]}
    ar = feats["residual.attnres"]
    assert ar["attrs"]["variant"] == "block" and ar["attrs"]["block_size"] == 12 and len(ar["layers"]) == 93
    lat = feats["moe.latent"]["attrs"]
    assert lat == {"latent_size": 3584, "routing_space": "hidden", "latent_norm": True}
    assert feats["moe.routed"]["attrs"]["router"] == "sigmoid"
    assert feats["moe.shared_experts"]["attrs"]["width"] == 6144
    kda = feats["linear_attention.kda"]["attrs"]
    assert (kda["num_heads"], kda["head_dim"], kda["gate_lower_bound"], kda["output_gate"]) == (
        96, 128, -5.0, "full_rank")
    mla = feats["attention.mla"]["attrs"]
    assert (mla["kv_lora_rank"], mla["q_lora_rank"], mla["rope_dim"], mla["cache_width_per_token"]) == (
        512, 1536, 64, 576)
    assert "attention.nope" in feats and "attention.output_gate" in feats
    assert feats["ffn.activation"]["attrs"]["name"] == "situ"
    # MXFP4 on the routed experts only: 92 layers x 896 experts x 3 matrices
    assert doc["quantization"] == [{"scheme": "mxfp4", "tensors": 92 * 896 * 3, "bits": 4, "group_size": 32}]
    assert all("experts" in e["tensor"] for e in feats["quant.mxfp4"]["evidence"])
    assert "multimodal.vision" in feats
    s = doc["storage"]
    assert (s["files"], s["tensors"]) == (96, 497_220)
    assert s["bytes"] > 1.5e12
    header_total = 0
    for name in os.listdir(k3_sparse):
        if name.endswith(".safetensors"):
            with open(os.path.join(k3_sparse, name), "rb") as f:
                header_total += 8 + int.from_bytes(f.read(8), "little")
    assert s["header_bytes_read"] == header_total
    assert doc["unrecognized"] == []
