"""Positions where the zoo's 8-token prompt cannot reach them, checked against transformers' own code:
sinusoidal tables (CTRL, XGLM) row for row, Llama 4 / Ministral 3 query scaling past the original
context, and a Gemma 3 whose full-attention layers use linear-scaled rope while the sliding layers use
their own base (per-layer-type rope_parameters), each through validate's card path."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
from tests.support import zoo  # noqa: E402
from tests.support.tiny_models import save  # noqa: E402

pytestmark = pytest.mark.needs_transformers

from archprobe.nn.positions import sinusoidal_positions  # noqa: E402
from archprobe.testing import assert_close  # noqa: E402
from archprobe.validate import validate  # noqa: E402

PROMPT = [5, 17, 42, 99, 3, 128, 77, 200, 11, 64, 31, 8]   # 12 tokens: past an original context of 4


@pytest.mark.parametrize("dim", [16, 17])
def test_sinusoidal_tables_equal_ctrl_and_xglm(dim):
    from transformers.models.ctrl.modeling_ctrl import positional_encoding
    from transformers.models.xglm.modeling_xglm import XGLMSinusoidalPositionalEmbedding

    pos = torch.arange(40)
    if dim % 2 == 0:   # CTRL's formula needs an even width
        want = positional_encoding(40, dim, torch.float32)
        assert_close("same_algorithm", want, sinusoidal_positions(pos, dim, "vaswani"), torch.float32)
    want = XGLMSinusoidalPositionalEmbedding.get_embedding(40 + 2, dim)[2:]   # XGLM reads row t + 2
    assert_close("same_algorithm", want, sinusoidal_positions(pos + 2, dim, "tensor2tensor"), torch.float32)


def test_proportional_rope_frequencies_equal_transformers():
    """Gemma 4 / LFM3's `proportional` rope: the whole head, a fraction of its frequencies, the rest zero."""
    from transformers import CONFIG_MAPPING
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from archprobe.nn.rope import Rope

    cfg = CONFIG_MAPPING["lfm3"](head_dim=32)
    cfg.rope_parameters["full_attention"].update(partial_rotary_factor=0.25, factor=2.0)
    want, att = ROPE_INIT_FUNCTIONS["proportional"](cfg, "cpu", layer_type="full_attention")
    got, got_att = Rope(1e6, 32, "proportional", dict(cfg.rope_parameters["full_attention"])).inv_freq(1)
    assert int((want > 0).sum()) == 4 and att == got_att == 1.0
    assert_close("same_algorithm", want, got, torch.float32)


def _run(member, tmp_path):
    save(zoo.make_model(member), tmp_path)
    doc = validate(str(tmp_path), prompt_ids=PROMPT, reference="transformers")
    ref = doc["reference"]
    assert doc["status"] == "pass", (doc["status"], ref and {k: ref.get(k) for k in ("max_abs_diff", "kl")})
    assert ref["max_abs_diff"] <= 1e-4 * ref["logit_scale"] and ref["kl"] <= 1e-6
    return doc


def test_ministral3_query_scaling_past_the_original_context(tmp_path):
    """original_max_position_embeddings 4: tokens 4..11 are scaled by 1 + 0.5 log(1 + floor(t / 4))."""
    rope = {"rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0, "original_max_position_embeddings": 4,
            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.5}
    member = zoo._g("ministral3_long", "ministral3", "dense gqa yarn", rope_parameters=rope, sliding_window=None)
    _run(member, tmp_path)


def test_gemma3_linear_scaled_full_layers_beside_local_base(tmp_path):
    rope = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    member = zoo._m("gemma3_scaled", "gemma3_text", "dense", num_hidden_layers=3, head_dim=16,
                    query_pre_attn_scalar=16, sliding_window=4, rope_parameters=rope,
                    layer_types=["sliding_attention", "sliding_attention", "full_attention"])
    doc = _run(member, tmp_path)
    assert doc["status"] == "pass"


@pytest.mark.parametrize("length", [2048, 4])   # Beam's constant, and one that makes the scale large
def test_ssmax_query_scale_equals_beams_nope_attention(length, monkeypatch):
    """Beam's full-attention layers run without rope and scale q by (1 + (t + 1) / 2048) ** 0.1; with a
    zero gate bias, its attention module is ours with qk-norm, the sigmoid output gate and query_scale."""
    import transformers.models.beam.modeling_beam as beam
    from transformers import CONFIG_MAPPING

    from archprobe.nn.attention import Attention

    monkeypatch.setattr(beam, "compute_attention_scaling",   # the module's formula with a chosen length
                        lambda pos: torch.exp(0.1 * torch.log1p((pos.float() + 1) / length))[:, None, :, None])
    cfg = CONFIG_MAPPING["beam"](hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                 num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"],
                                 sliding_window=4, rope_parameters={"full_attention": None, "sliding_attention": {
                                     "rope_type": "default", "rope_theta": 1e4}})
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    ref = beam.BeamAttention(cfg, layer_idx=1).eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.normal_(0, 0.3)
        ref.gate_bias.zero_()
    ours = Attention(64, 4, 2, 16, rope_theta=None, qk_norm="head", output_gate=True, norm_eps=cfg.rms_norm_eps,
                     query_scale={"form": "ssmax", "length": length, "power": 0.1})
    state = {k.replace("gate_proj", "g_proj"): v for k, v in ref.state_dict().items() if k != "gate_bias"}
    ours.load_state_dict(state)
    x = torch.randn(1, 12, 64)
    pos = torch.arange(12)[None]
    mask = torch.full((12, 12), float("-inf")).triu(1)[None, None]
    want, _ = ref(x, None, mask, attention_scaling=beam.compute_attention_scaling(pos))
    got, _ = ours(x)
    assert_close("same_algorithm", want, got, torch.float32)


def test_llama4_temperature_tuning_on_nope_layers_equals_transformers(tmp_path):
    """Llama 4's NoPE layers scale q by 1 + attn_scale * log(1 + floor((t + 1) / floor_scale)); floor_scale
    4 makes it act inside a 12-token prompt. The card reads it from the config keys."""
    import transformers.models.llama4.modeling_llama4 as llama4
    from transformers import CONFIG_MAPPING

    from archprobe.nn.attention import Attention

    cfg = CONFIG_MAPPING["llama4_text"](hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                        num_hidden_layers=2, no_rope_layers=[1, 0], floor_scale=4, attn_scale=0.3,
                                        attn_temperature_tuning=True)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    ref = llama4.Llama4TextAttention(cfg, layer_idx=1).eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.normal_(0, 0.3)
    spec = {"form": "log_floor", "beta": 0.3, "length": 4.0, "shift": 1}
    ours = Attention(64, 4, 2, 16, rope_theta=None, query_scale=spec)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(1, 12, 64)
    mask = torch.full((12, 12), float("-inf")).triu(1)[None, None]
    want = ref(x, None, mask)[0]
    assert_close("same_algorithm", want, ours(x)[0], torch.float32)
    # the card: NoPE layer 1 gets that spec from attn_temperature_tuning / floor_scale / attn_scale
    from tests.support.positions_card import positions_card

    card = positions_card(tmp_path, {"rope_theta": 5e5, "no_rope_layers": [1, 0, 1],
                                     "attn_temperature_tuning": True, "floor_scale": 4, "attn_scale": 0.3})
    assert [layer.mixer.query_scale for layer in card.layers] == [None, spec, None]
    assert card.origins["layers.1.mixer.query_scale"] == "config:attn_temperature_tuning"


def test_inverse_rope_equals_nanochats_flipped_rotate_half():
    """NanoChat's rotate_half returns [x2, -x1]: a rotation by the negative angle, which the card reads
    from the family table (rope.inverse) and the Rope applies by negating sin."""
    from transformers.models.nanochat.modeling_nanochat import apply_rotary_pos_emb

    from archprobe.nn.rope import Rope

    q, k = torch.randn(1, 12, 4, 16), torch.randn(1, 12, 2, 16)
    pos = torch.arange(12)
    rope = Rope(1e4, 16, inverse=True)
    cos, sin = Rope(1e4, 16).cos_sin(pos)
    want_q, want_k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos[None], sin[None])
    assert_close("same_algorithm", want_q.transpose(1, 2), rope.apply(q, pos), torch.float32)
    assert_close("same_algorithm", want_k.transpose(1, 2), rope.apply(k, pos), torch.float32)
    assert not torch.allclose(Rope(1e4, 16).apply(q, pos), want_q.transpose(1, 2), atol=1e-3)
