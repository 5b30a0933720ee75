"""Value heads narrower than the q/k heads (MiMo-V2-Flash: 192 vs 128) can make q exactly twice as wide as the
output projection's input (head_dim = 2 x v_head_dim), which is also the shape of an output gate fused into
q_proj (Qwen3-Next). The value projection settles it: when its heads explain o's input, q holds no gate."""

from __future__ import annotations

import json
import os

from archprobe.formats.sources import open_source
from archprobe.structure.inspect import build_card
from archprobe.writers.safetensors import write_safetensors

H, V, HEADS, KV = 96, 64, 4, 2


def _card(folder, q: int, k: int, v: int, o_in: int):
    t = [("model.embed_tokens.weight", "F32", (V, H)), ("model.norm.weight", "F32", (H,)),
         ("lm_head.weight", "F32", (V, H))]
    for i in range(2):
        p = f"model.layers.{i}."
        t += [(p + "input_layernorm.weight", "F32", (H,)), (p + "post_attention_layernorm.weight", "F32", (H,)),
              (p + "self_attn.q_proj.weight", "F32", (q, H)), (p + "self_attn.k_proj.weight", "F32", (k, H)),
              (p + "self_attn.v_proj.weight", "F32", (v, H)), (p + "self_attn.o_proj.weight", "F32", (H, o_in)),
              (p + "mlp.gate_proj.weight", "F32", (128, H)), (p + "mlp.up_proj.weight", "F32", (128, H)),
              (p + "mlp.down_proj.weight", "F32", (H, 128))]
    write_safetensors(os.path.join(folder, "model.safetensors"), [(*e, None) for e in t])
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "acme", "hidden_size": H, "vocab_size": V, "num_hidden_layers": 2,
                   "num_attention_heads": HEADS, "num_key_value_heads": KV, "rms_norm_eps": 1e-5}, f)
    return build_card(open_source(str(folder))).card


def test_q_twice_o_with_narrow_value_heads_is_no_gate(tmp_path):
    # q/k heads of 32, value heads of 16: q [4 x 32], k [2 x 32], v [2 x 16], o reads 4 x 16 = half of q
    card = _card(tmp_path, q=HEADS * 32, k=KV * 32, v=KV * 16, o_in=HEADS * 16)
    m = card.layers[0].mixer
    assert (m.num_heads, m.num_kv_heads, m.head_dim, m.v_head_dim) == (HEADS, KV, 32, 16)
    assert m.output_gate is None
    assert card.unexplained == []


def test_q_twice_o_with_values_as_wide_as_keys_is_a_gate_in_q(tmp_path):
    # the same q and o, but v as wide as k: q carries the heads and their gate (Qwen3-Next's gated attention)
    card = _card(tmp_path, q=HEADS * 16 * 2, k=KV * 16, v=KV * 16, o_in=HEADS * 16)
    m = card.layers[0].mixer
    assert (m.num_heads, m.head_dim) == (HEADS, 16)
    assert m.output_gate == "fused_in_q_proj"
