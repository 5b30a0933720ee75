"""validate's build and stream steps on hand-written cards (no derivation involved): a card's fields and
roles are all validate needs to reproduce transformers, whatever the tensors are called; storage layouts
(Conv1D [in, out], fused qkv, stacked and interleaved experts) come from the card's layout; a field the
card leaves unknown, or a tensor it cannot explain, is a refusal that names it."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from safetensors.torch import load_file, save_file  # noqa: E402

from archprobe.formats.sources import open_source  # noqa: E402
from archprobe.structure.card import Card  # noqa: E402
from archprobe.testing import assert_close  # noqa: E402
from archprobe.validate.build import blueprint  # noqa: E402
from archprobe.validate.load import TensorReader  # noqa: E402
from archprobe.validate.plan import NeedsField, Unsupported  # noqa: E402
from archprobe.validate.stream import stream_forward  # noqa: E402
from tests.support.tiny_models import FAMILY_PROMPT_IDS, build  # noqa: E402
from tests.support.tiny_models import perturb_parameters as perturb  # noqa: E402

IDS = torch.tensor(FAMILY_PROMPT_IDS)

RMS = {"kind": "rms", "eps": 1e-6, "offset": False, "bias": False}


def _save(model_type: str, folder, **cfg):
    from transformers import AutoConfig

    model = build(AutoConfig.for_model(model_type, **cfg), folder, adjust=perturb)
    with torch.no_grad():
        return model(IDS).logits


def _run(card: Card, folder) -> torch.Tensor:
    raw = open_source(str(folder))
    reader = TensorReader(str(folder), raw.headers)
    bp = blueprint(card, reader.all_shapes(card.tensors.values()))
    result = stream_forward(bp, reader, IDS, torch.float32, bp.config.num_hidden_layers)
    assert not result.problems, result.problems
    return result.logits


def llama_card(prefix: str = "model.", words: dict | None = None) -> Card:
    w = {"layers": "layers", "self_attn": "self_attn", "q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj",
         "o_proj": "o_proj", "mlp": "mlp", "gate_proj": "gate_proj", "up_proj": "up_proj",
         "down_proj": "down_proj", "input_layernorm": "input_layernorm",
         "post_attention_layernorm": "post_attention_layernorm", "embed_tokens": "embed_tokens", "norm": "norm",
         "lm_head": "lm_head", **(words or {})}
    tensors = {"embed": f"{prefix}{w['embed_tokens']}.weight", "final_norm": f"{prefix}{w['norm']}.weight",
               "head": f"{w['lm_head']}.weight"}
    layers = []
    for i in range(2):
        base = f"{prefix}{w['layers']}.{i}."
        for role, mod in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj")):
            tensors[f"layers.{i}.mixer.{role}"] = f"{base}{w['self_attn']}.{w[mod]}.weight"
        for role, mod in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
            tensors[f"layers.{i}.ffn.{role}"] = f"{base}{w['mlp']}.{w[mod]}.weight"
        tensors[f"layers.{i}.norm.pre_mixer"] = f"{base}{w['input_layernorm']}.weight"
        tensors[f"layers.{i}.norm.pre_ffn"] = f"{base}{w['post_attention_layernorm']}.weight"
        layers.append({"index": i, "mixer": {"kind": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 16},
                       "ffn": {"kind": "dense", "activation": "silu", "gated": True, "width": 96},
                       "norm": {"pre_mixer": RMS, "pre_ffn": RMS}})
    return Card.from_dict({"hidden_size": 64, "vocab_size": 256, "num_layers": 2, "max_position_embeddings": 2048,
                           "rope": {"theta": 10000.0, "type": "default"}, "final_norm": RMS,
                           "embed": {"pos_kind": "rope"}, "layers": layers, "tensors": tensors})


LLAMA = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6)


def test_llama_from_a_hand_written_card_matches_transformers(tmp_path):
    want = _save("llama", tmp_path, **LLAMA)
    assert_close("cross_implementation", want, _run(llama_card(), tmp_path), torch.float32)


def test_a_renamed_twin_gives_the_same_logits(tmp_path):
    """Every module path renamed (Meta's wq/w1 vocabulary): the card binds the same roles to new names."""
    _save("llama", tmp_path / "orig", **LLAMA)
    words = {"layers": "blocks", "self_attn": "mixer", "q_proj": "wq", "k_proj": "wk", "v_proj": "wv",
             "o_proj": "wo", "mlp": "ffn", "gate_proj": "w1", "up_proj": "w3", "down_proj": "w2",
             "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "embed_tokens": "tok",
             "norm": "final_ln", "lm_head": "output"}
    orig_card, twin_card = llama_card(), llama_card("backbone.", words)
    tensors = load_file(str(tmp_path / "orig" / "model.safetensors"))
    renamed = {twin_card.tensors[role]: tensors[name] for role, name in orig_card.tensors.items()}
    (tmp_path / "twin").mkdir()
    save_file(renamed, str(tmp_path / "twin" / "model.safetensors"))
    (tmp_path / "twin" / "config.json").write_text('{"model_type": "acme_lm"}')
    a, b = _run(orig_card, tmp_path / "orig"), _run(twin_card, tmp_path / "twin")
    assert torch.equal(a, b)


def test_unknown_field_is_named_with_how_to_set_it(tmp_path):
    card = llama_card()
    card.layers[1].mixer.num_kv_heads = None
    with pytest.raises(NeedsField) as err:
        blueprint(card, {})
    assert "layers.1.mixer.num_kv_heads" in err.value.message and "--card" in err.value.hint


def test_an_unexplained_tensor_makes_the_model_unsupported():
    card = llama_card()
    card.unexplained = ["model.layers.0.self_attn.lambda_q1"]
    with pytest.raises(Unsupported, match="lambda_q1"):
        blueprint(card, {})


def test_unknown_mixer_kind_is_unsupported_naming_it():
    card = llama_card()
    card.layers[0].mixer.kind = "wavelet"   # a kind archprobe.nn has no module for
    with pytest.raises(Unsupported, match="layers.0.mixer.kind 'wavelet'"):
        blueprint(card, {})


def _gpt2_card() -> Card:
    """GPT-2's card: Conv1D weights [in, out] and c_attn a fused q | k | v, both from the card's layout."""
    ln = {"kind": "layer", "eps": 1e-5, "bias": True}
    tensors = {"embed": "transformer.wte.weight", "pos_embed": "transformer.wpe.weight",
               "final_norm": "transformer.ln_f.weight", "final_norm.bias": "transformer.ln_f.bias"}
    layers = []
    for i in range(2):
        h = f"transformer.h.{i}."
        for role, name in (("mixer.qkv", "attn.c_attn"), ("mixer.o", "attn.c_proj"), ("ffn.up", "mlp.c_fc"),
                           ("ffn.down", "mlp.c_proj"), ("norm.pre_mixer", "ln_1"), ("norm.pre_ffn", "ln_2")):
            tensors[f"layers.{i}.{role}"] = f"{h}{name}.weight"
            tensors[f"layers.{i}.{role}.bias"] = f"{h}{name}.bias"
        layers.append({"index": i, "mixer": {"kind": "mha", "num_heads": 4, "num_kv_heads": 4, "head_dim": 16,
                                             "layout": {"transposed": True, "qkv_split": [64, 64, 64]}},
                       "ffn": {"kind": "dense", "activation": "gelu_new", "gated": False, "width": 256, "bias": True,
                               "layout": {"transposed": True}},
                       "norm": {"pre_mixer": ln, "pre_ffn": ln}})
    return Card.from_dict({"hidden_size": 64, "vocab_size": 256, "num_layers": 2, "tie_word_embeddings": True,
                           "embed": {"pos_kind": "learned"}, "final_norm": ln, "layers": layers, "tensors": tensors})


GPT2 = dict(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=64)


def test_gpt2_conv1d_fused_qkv_learned_positions(tmp_path):
    want = _save("gpt2", tmp_path, **GPT2)
    assert_close("cross_implementation", want, _run(_gpt2_card(), tmp_path), torch.float32)


def test_stored_layouts_are_typed_sources_apart_from_parameters(tmp_path):
    """A tensor stored in a layout (GPT-2's Conv1D [in, out], its fused c_attn) is a typed source the layouts
    derive parameters from, never a module name: what a part loads as is are parameters of its module, every
    source feeds a derived parameter, and together they are the module's whole state."""
    from archprobe.nn.decoder import DecoderLayer
    from archprobe.validate.layouts import Layout

    _save("gpt2", tmp_path, **GPT2)
    card = _gpt2_card()
    reader = TensorReader(str(tmp_path), open_source(str(tmp_path)).headers)
    bp = blueprint(card, reader.all_shapes(card.tensors.values()))
    part = bp.parts[0]
    with torch.device("meta"):
        own = set(DecoderLayer(bp.config.layer_spec(0)).state_dict())
    derived = {d.target for d in part.derived}
    assert set(part.names) <= own and derived <= own and not set(part.names) & derived
    assert set(part.names) | derived == own
    assert {s for d in part.derived for s in d.sources} == set(part.sources)
    by_layout = {}
    for src, name in part.sources.items():
        by_layout.setdefault(src.layout, set()).add(name)
    h = "transformer.h.0."
    assert by_layout == {Layout.FUSED_QKV: {h + "attn.c_attn.weight", h + "attn.c_attn.bias"},
                         Layout.TRANSPOSED: {h + n + ".weight" for n in ("attn.c_proj", "mlp.c_fc", "mlp.c_proj")}}


def test_gpt_oss_stacked_transposed_interleaved_experts_sinks_router_bias(tmp_path):
    want = _save("gpt_oss", tmp_path, **{**LLAMA, "intermediate_size": 32, "rms_norm_eps": 1e-5},
                 num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
                 layer_types=["sliding_attention", "full_attention"])
    rms = {**RMS, "eps": 1e-5}
    tensors = {"embed": "model.embed_tokens.weight", "final_norm": "model.norm.weight", "head": "lm_head.weight"}
    layers = []
    for i in range(2):
        b = f"model.layers.{i}."
        for p in "qkvo":
            tensors[f"layers.{i}.mixer.{p}"] = f"{b}self_attn.{p}_proj.weight"
            tensors[f"layers.{i}.mixer.{p}.bias"] = f"{b}self_attn.{p}_proj.bias"
        tensors[f"layers.{i}.mixer.sinks"] = f"{b}self_attn.sinks"
        tensors[f"layers.{i}.ffn.router"] = f"{b}mlp.router.weight"
        tensors[f"layers.{i}.ffn.router.bias"] = f"{b}mlp.router.bias"
        for p in ("gate_up", "down"):
            tensors[f"layers.{i}.ffn.experts.{p}"] = f"{b}mlp.experts.{p}_proj"
            tensors[f"layers.{i}.ffn.experts.{p}.bias"] = f"{b}mlp.experts.{p}_proj_bias"
        tensors[f"layers.{i}.norm.pre_mixer"] = f"{b}input_layernorm.weight"
        tensors[f"layers.{i}.norm.pre_ffn"] = f"{b}post_attention_layernorm.weight"
        layers.append({"index": i, "mixer": {"kind": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 16,
                                             "sinks": True, "sliding_window": 4 if i == 0 else None},
                       "ffn": {"kind": "moe", "activation": "swiglu_oss", "gated": True, "num_experts": 4, "top_k": 2,
                               "expert_width": 32, "router": {"scoring": "softmax", "selection_bias": False,
                                                              "renormalize": True},
                               "layout": {"experts": "stacked", "stacked_transposed": True, "gate_up": "interleaved"}},
                       "norm": {"pre_mixer": rms, "pre_ffn": rms}})
    rope = {"theta": 150000.0, "type": "yarn", "factor": 32.0, "original_max_position": 4096,
            "scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}}
    card = Card.from_dict({"hidden_size": 64, "vocab_size": 256, "num_layers": 2, "max_position_embeddings": 131072,
                           "rope": rope, "final_norm": rms, "layers": layers, "tensors": tensors})
    assert_close("cross_implementation", want, _run(card, tmp_path), torch.float32)
