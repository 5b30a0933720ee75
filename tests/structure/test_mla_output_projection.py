"""MLA's output projection is found by its shape, whatever the names: never the kv or q-LoRA up-projection
(a q up-projection [heads x head dim, r] is [H, r] where heads x head dim = H), and where an output gate has
the output's own shape (the demo's Gated MLA: heads x v_head_dim = H), the names break the tie."""

from __future__ import annotations

import json
import os

import pytest

from archprobe.formats.sources import open_source
from archprobe.structure.inspect import build_card
from archprobe.writers.safetensors import write_safetensors

H, V, NH, NOPE, ROPE, VD, QL, R = 64, 128, 4, 12, 4, 16, 32, 16


def _write(folder, names: dict[str, str], gate: bool = False) -> str:
    """One DeepSeek-V3-shaped MLA layer (+ a dense FFN) whose attention tensors carry `names`."""
    p = "model.layers.0."
    shapes = {"q_a": (QL, H), "q_a_norm": (QL,), "q_b": (NH * (NOPE + ROPE), QL), "kv_a": (R + ROPE, H),
              "kv_a_norm": (R,), "kv_b": (NH * (NOPE + VD), R), "o": (H, NH * VD)}
    if gate:
        shapes["g"] = (NH * VD, H)
    t = [("model.embed_tokens.weight", "F32", (V, H)), ("model.norm.weight", "F32", (H,)),
         ("lm_head.weight", "F32", (V, H)), (p + "input_layernorm.weight", "F32", (H,)),
         (p + "post_attention_layernorm.weight", "F32", (H,)), (p + "mlp.gate_proj.weight", "F32", (96, H)),
         (p + "mlp.up_proj.weight", "F32", (96, H)), (p + "mlp.down_proj.weight", "F32", (H, 96))]
    t += [(p + f"self_attn.{names[role]}.weight", "F32", shape) for role, shape in shapes.items()]
    write_safetensors(os.path.join(folder, "model.safetensors"), [(*e, None) for e in t])
    cfg = {"model_type": "mystery_mla", "hidden_size": H, "vocab_size": V, "num_hidden_layers": 1,
           "num_attention_heads": NH, "rms_norm_eps": 1e-6, "intermediate_size": 96}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    return str(folder)


PLAIN = {"q_a": "q_a_proj", "q_a_norm": "q_a_layernorm", "q_b": "q_b_proj", "kv_a": "kv_a_proj_with_mqa",
         "kv_a_norm": "kv_a_layernorm", "kv_b": "kv_b_proj", "o": "o_proj", "g": "g_proj"}
# renamed so that the q up-projection [H, r] (heads x (nope + rope) = 64 = H) sorts before the output
RENAMED = {"q_a": "zq_down", "q_a_norm": "zq_norm", "q_b": "aa_query_up", "kv_a": "zkv_down", "kv_a_norm": "zkv_norm",
           "kv_b": "zkv_up", "o": "zz_writer", "g": "a_gate"}


@pytest.mark.parametrize("names", [PLAIN, RENAMED], ids=["plain", "renamed"])
def test_output_projection_by_shape(tmp_path, names):
    card = build_card(open_source(_write(tmp_path, names))).card
    bound = {role.rsplit(".", 1)[-1]: name for role, name in card.tensors.items() if ".mixer." in role}
    assert card.layers[0].mixer.kind == "mla"
    assert bound["o"].endswith(f".{names['o']}.weight"), bound
    assert bound["q_b"].endswith(f".{names['q_b']}.weight"), bound


def test_a_gate_of_the_outputs_shape_is_the_gate(tmp_path):
    """heads x v_head_dim = H: the gate [H, H] and the output [H, H] tie on shape; names break it."""
    assert NH * VD == H
    card = build_card(open_source(_write(tmp_path, PLAIN, gate=True))).card
    bound = {role.rsplit(".", 1)[-1]: name for role, name in card.tensors.items() if ".mixer." in role}
    assert bound["o"].endswith(".o_proj.weight") and bound["g"].endswith(".g_proj.weight"), bound
    assert card.layers[0].mixer.output_gate == "sigmoid_g_proj"
