"""Build the card once from config.json and the shard headers: shapes first, config keys second,
the per-family table last. Every field set here records its origin (`shape`, `config:<key>`, `default`).

Steps: classify quantized storage (formats.quant) -> arrange tensors (tensors.build_table: the layer
stack by its enumeration, MTP and vision set aside) -> bind every layer (bind_layer) -> bind the model
level (embedding, positions, final norm, head, AttnRes output site) -> fill what shapes cannot say from
config keys (rope, eps, activation, top-k, scoring, windows, soft-caps) -> the quantization summary.
"""

from __future__ import annotations

import math
import struct
from collections import Counter

from archprobe.formats.checkpoint import RawCheckpoint
from archprobe.formats.quant import classify, summarize
from archprobe.structure.bind_layer import bind_layer, common_prefix_len, norm_eps, weightless_norm
from archprobe.structure.card import Card
from archprobe.structure.config import ConfigError, ConfigView
from archprobe.structure.modules import Module, group_modules
from archprobe.structure.names import says
from archprobe.structure.norm_convention import plain_gain_source
from archprobe.structure.positions import derive_positions
from archprobe.structure.sliding import layer_windows, listed_windows
from archprobe.structure.tensors import TensorTable, build_table

GROUP_SCORES = {"group_limited_greedy": "max", "noaux_tc": "top2_sum"}   # DeepSeek's topk_method -> group score


class Derived:
    """The card plus what the other outputs need from the same pass (table, config, quant roles)."""

    def __init__(self, card: Card, table: TensorTable, cfg: ConfigView, tensors: list, roles: dict,
                 layer_modules: dict[int, dict[str, Module]]):
        self.card, self.table, self.cfg, self.tensors, self.roles = card, table, cfg, tensors, roles
        self.layer_modules = layer_modules


def _hidden(cfg: ConfigView, table: TensorTable) -> tuple[int | None, str]:
    h, where = cfg.first_int_at("hidden_size", "d_model", "n_embd", "dim", "model_dim")
    if h:
        return h, f"config:{where}"
    mats = [e for e in table.model.values() if len(e.shape) == 2]
    if mats:
        return max(mats, key=lambda e: e.shape[0]).shape[1], "shape"
    widths = Counter(e.shape[0] for layer in table.layers.values() for e in layer.values() if len(e.shape) == 1)
    return (widths.most_common(1)[0][0], "shape") if widths else (None, "shape")


def derive(raw: RawCheckpoint) -> Derived:
    cfg = ConfigView(raw.config)
    tensors = [t for h in raw.headers for t in h.tensors]
    qroles = classify(tensors, cfg.quantization_config)
    n_layers, n_where = cfg.first_int_at("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    hidden_guess, _ = cfg.first_int_at("hidden_size", "d_model", "n_embd", "dim", "model_dim")
    table = build_table(tensors, qroles, n_layers, gguf=raw.kind == "gguf", hidden=hidden_guess)
    H, h_origin = _hidden(cfg, table)
    card = Card(model_type=cfg.model_type, architectures=cfg.architectures, hidden_size=H)
    card.origins["hidden_size"] = h_origin
    card.warnings += table.warnings
    card.num_layers = len(table.layers) or None
    card.origins["num_layers"] = "shape"
    notes: list[str] = []
    layer_modules: dict[int, dict[str, Module]] = {}
    for pos, (i, layer) in enumerate(table.layers.items()):
        lay, lroles, unexplained = bind_layer(pos, layer, H or 0, cfg, notes)
        lay.index = i
        card.layers.append(lay)
        layer_modules[i] = {r: m for r, m in lroles.items()}
        for r, m in lroles.items():
            for suffix, e in m.entries():     # embed_norm: the embeddings' norm inside block 0 (RWKV)
                card.tensors[f"{r}{suffix}" if r == "embed_norm" else f"layers.{pos}.{r}{suffix}"] = e.name
            if r == "embed_norm":
                card.embed.norm = "layer" if m.bias is not None else "rms"
        for m in unexplained:
            card.unexplained += [e.name for _, e in m.entries()]
    _ssm_norms_are_rms(card, cfg)
    _model_level(card, table, H, cfg)
    card.set_aside = {"vision": [e.name for e in table.vision],
                      "mtp": [e.name for layer in table.mtp.values() for e in layer.values()]}
    _from_config(card, cfg, n_where)
    card.quantization = summarize(tensors, qroles)
    accounted = set(card.tensors.values()) | set(card.unexplained) | set(card.set_aside["vision"]) | set(
        card.set_aside["mtp"])
    card.unexplained += [e.name for e in table.all_entries() if e.name not in accounted]   # never drop one
    return Derived(card, table, cfg, tensors, qroles, layer_modules)


def _ssm_norms_are_rms(card: Card, cfg: ConfigView) -> None:
    """The Mamba lineage (mamba, falcon_mamba, mamba2, jamba, bamba, nemotron_h, ...) names its norms' eps
    `layer_norm_epsilon` yet uses RMSNorms everywhere (MambaRMSNorm, NemotronHRMSNorm in transformers):
    in a model with an SSM mixer, a bias-free norm that only that key's name called LayerNorm is RMS."""
    if cfg.get("rms_norm_eps") is not None or cfg.get("norm_type") is not None:
        return
    if not any(layer.mixer.kind in ("mamba", "mamba2") for layer in card.layers):
        return
    for layer in card.layers:
        for norm in layer.norm.values():
            if norm.kind == "layer" and not norm.bias:
                norm.kind = "rms"


def _model_level(card: Card, table: TensorTable, H: int | None, cfg: ConfigView) -> None:
    mods = group_modules({name: e for name, e in table.model.items()})
    V, _ = cfg.first_int_at("vocab_size", "padded_vocab_size", "n_vocab")
    mats = [m for m in mods.values() if len(m.shape) == 2 and m.shape[1] == H and m.shape[0] > 1]
    if V is None and mats:
        V = max(m.shape[0] for m in mats)
    vocab_like = [m for m in mats if V is None or V <= m.shape[0] <= V + 128 + V // 50]   # padded vocab
    roles: dict[str, Module] = {}
    if vocab_like:
        # the embedding feeds the trunk (it sits beside the layers, under their parent module), the head reads
        # the trunk's output from outside it: position decides where it separates them, names only after that
        trunk = (table.layer_prefix or "").rpartition(".")[0]
        inside = {id(m): bool(trunk) and m.path.startswith(trunk + ".") for m in vocab_like}
        by_place = len(set(inside.values())) > 1
        vocab_like.sort(key=lambda m: (by_place and not inside[id(m)],
                                       2 if says(m.path, "lm_head") else 0 if says(m.path, "embed") else 1,
                                       m.path.count("."), m.path))
        roles["embed"] = vocab_like[0]
        if len(vocab_like) > 1:
            roles["head"] = vocab_like[1]
        card.vocab_size = vocab_like[0].shape[0]
        card.origins["vocab_size"] = "shape"
    if not vocab_like and V:        # embeddings narrower or wider than H, projected in and out (OPT-350m)
        emb = next((m for m in mods.values() if len(m.shape) == 2 and m.shape[0] == V), None)
        if emb is not None:
            E = emb.shape[1]
            roles["embed"] = emb
            card.vocab_size = V
            p_in = next((m for m in mods.values() if m.shape == (H, E)), None)
            p_out = next((m for m in mods.values() if m.shape == (E, H) and m is not p_in), None)
            if p_in is not None:
                roles["embed_proj"] = p_in
            if p_out is not None:
                roles["head_proj"] = p_out
            heads = [m for m in mods.values() if len(m.shape) == 2 and m.shape[0] == V and m is not emb]
            if heads:
                roles["head"] = heads[0]
    P, _ = cfg.first_int_at("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
    pos = [m for m in mats if m not in roles.values() and (m.shape[0] != H or P == H)
           and not says(m.path, "lm_head")]
    if pos:
        roles["pos_embed"] = pos[0]
        card.embed.pos_kind, card.origins["embed.pos_kind"] = "learned", "shape"
        if P and pos[0].shape[0] == P + 2:     # OPT / BioGPT keep 2 rows before position 0 (padding offset)
            card.embed.position_offset, card.origins["embed.position_offset"] = 2, "shape"
    queries = [m for m in mods.values() if m.shape == (1, H)]
    vecs = [m for m in mods.values() if m.shape == (H,)]
    squares = [m for m in mods.values() if m.shape == (H, H) and id(m) not in set(map(id, roles.values()))]
    if len(squares) == 1:           # a prediction-head transform before the tied head (ModernBERT, BERT)
        roles["head_transform"] = squares[0]
        near = squares[0].path
        hn = max(vecs, key=lambda v: common_prefix_len(v.path, near), default=None) if len(vecs) > 1 else None
        if hn is not None and common_prefix_len(hn.path, squares[0].path) > 0:
            roles["head_transform_norm"] = hn
            vecs.remove(hn)
    if queries:
        roles["output_residual.query"] = queries[0]
        if len(vecs) > 1:
            norm = max(vecs, key=lambda v: common_prefix_len(v.path, queries[0].path))
            roles["output_residual.norm"] = norm
            vecs.remove(norm)
    if vecs:
        emb_norm = [v for v in vecs if says(v.path, "embed_norm")]
        final = [v for v in vecs if v not in emb_norm] or vecs
        roles["final_norm"] = final[-1]
        if emb_norm and emb_norm[0] is not final[-1]:
            roles["embed_norm"] = emb_norm[0]
    if "head" not in roles:       # a tied head may still carry its own bias (CTRL)
        hbs = [m for m in mods.values() if m.weight is not None and m.weight.shape == (card.vocab_size,)
               and id(m) not in set(map(id, roles.values()))]
        hb = hbs[0] if len(hbs) == 1 else None
        if hb is not None:
            roles["head.bias"] = hb
    for role, m in roles.items():
        for suffix, e in m.entries():
            card.tensors[f"{role}{suffix}" if role != "head.bias" else role] = e.name
    used = set(map(id, roles.values()))
    for m in mods.values():            # a learned scalar on the logits (Dory's lm_head.logit_scale)
        if id(m) not in used and m.weight is not None and says(m.path, "lm_head") and (
                m.weight.info.numel == 1 or m.shape == (card.vocab_size,)):
            card.tensors[f"head.scale.{m.leaf}"] = m.weight.name
            used.add(id(m))
    for m in mods.values():
        if id(m) not in used:
            card.unexplained += [e.name for _, e in m.entries()]
    fn = roles.get("final_norm")
    if fn is None and weightless_norm(cfg):
        card.final_norm.kind, card.final_norm.bias = weightless_norm(cfg), False
        card.origins["final_norm.kind"] = ("default" if cfg.default("weightless_norm")
                                           else "config:layer_norm_elementwise_affine")
        if cfg.default("weightless_embed_norm"):     # nanochat normalises the embedding before the layers too
            card.embed.norm, card.origins["embed.norm"] = weightless_norm(cfg), "default"
    if fn is not None:
        card.final_norm.bias = fn.bias is not None
        card.final_norm.kind = "layer" if fn.bias is not None else (card.layers[0].norm.get("pre_mixer").kind
                                                                    if card.layers and card.layers[0].norm.get(
                                                                        "pre_mixer") else "rms")
        card.origins["final_norm.kind"] = "shape"
    card.tie_word_embeddings = "head" not in roles
    card.head.tied = card.tie_word_embeddings
    card.origins["head.tied"] = card.origins["tie_word_embeddings"] = "shape"


def _set(card: Card, path: str, value, origin: str) -> None:
    if value is not None:
        card.set(path, value, origin)


MUP_KEYS = ("attention_in_multiplier", "attention_out_multiplier", "ssm_in_multiplier", "ssm_out_multiplier",
            "key_multiplier", "mlp_multipliers", "ssm_multipliers")


def _mup_multipliers(cfg: ConfigView) -> dict:
    """Falcon-H1's muP multipliers that are not 1 (validate folds them into the weights they scale)."""
    out = {}
    for key in MUP_KEYS:
        v = cfg.get(key)
        values = v if isinstance(v, list) else [v]
        if v is not None and any(x != 1 for x in values):
            out[key] = v
    return out


def _from_norm_scales(cfg: ConfigView, mixer_kind: str) -> tuple[dict | None, str]:
    """MiniMax-01's residual is the normed stream, x = alpha n(x) + beta f(n(x)) with alpha/beta from
    `{linear_attn,full_attn,mlp}_{alpha,beta}_factor` (transformers' MiniMaxDecoderLayer.forward); the released
    MiniMax-Text-01 sets every alpha to (2 L)^(1/4). None when they are all 1."""
    site = "linear_attn" if mixer_kind == "lightning" else "full_attn"
    scales = {part: [cfg.get(f"{s}_{w}_factor", 1) for w in ("alpha", "beta")]
              for part, s in (("mixer", site), ("ffn", "mlp"))}
    bad = [v for vs in scales.values() for v in vs if isinstance(v, bool) or not isinstance(v, (int, float))]
    if bad:
        raise ConfigError(f"config.json: {site}/mlp alpha/beta factors must be numbers, not {str(bad[0])[:40]!r}")
    if all(v == 1 for vs in scales.values() for v in vs):
        return None, "default"
    return {k: [float(v) for v in vs] for k, vs in scales.items()}, f"config:{site}_alpha_factor"


def _bf16(x: float) -> float:
    """x rounded to bfloat16 (round to nearest even on the top 16 bits of its float32)."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _scales(card: Card, cfg: ConfigView) -> None:
    """Multipliers on the embedding, the branches, the softmax and the logits, by their config keys'
    meaning in transformers (granite, minicpm3, gemma2/3, cohere, biogpt, gpt2 modeling files)."""
    H = card.hidden_size

    def num(key: str) -> tuple[float | None, str | None]:   # a non-number (MPT's 'inv_sqrt_d_model') is not ours
        v = cfg.get(key)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        return (float(v), key) if ok else (None, None)

    if cfg.get("scale_embedding") is True and H:          # BioGPT, XGLM, M2M100: embed_scale = sqrt(H)
        _set(card, "embed.scale", math.sqrt(H), "config:scale_embedding")
    logit, where = num("logit_scale")          # Cohere: logits * logit_scale
    if logit is None:
        logit, where = num("lm_head_multiplier")    # Falcon-H1: logits * lm_head_multiplier
    _set(card, "head.scale", logit, f"config:{where}")
    div, where = num("logits_scaling")         # Granite: logits / logits_scaling
    if div:
        multiplies = cfg.default("logits_scaling") == "multiply"   # HyperCLOVA X multiplies instead
        _set(card, "head.scale", div if multiplies else 1.0 / div, f"config:{where}" if not multiplies else "default")
    base, _ = num("dim_model_base")               # MiniCPM: hidden / (H / dim_model_base)
    if base and H and cfg.get("scale_depth") is not None:
        _set(card, "head.scale", base / H, "config:dim_model_base")
    res, r_where = num("residual_multiplier")     # Granite: x + m * branch(x)
    depth, _ = num("scale_depth")                 # MiniCPM: m = scale_depth / sqrt(layers)
    n = cfg.first_int("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    if res is None and depth is not None and n:
        res, r_where = depth / math.sqrt(n), "scale_depth"
    att, a_where = num("attention_multiplier")    # Granite: the softmax scale itself
    qpas, _ = num("query_pre_attn_scalar")        # Gemma 2/3: scale = qpas ** -0.5
    if att is None and qpas:
        att, a_where = qpas ** -0.5, "query_pre_attn_scalar"
    clip, c_where = cfg.first_float_at("clip_qkv")               # OLMo, DBRX (attn_config.clip_qkv)
    by_depth = cfg.get("scale_attn_by_inverse_layer_idx") is True   # GPT-2 (Stanford CRFM): scale / (layer + 1)
    unscaled = cfg.get("scale_attn_weights") is False               # GPT-2: no 1/sqrt(head_dim) at all
    for i, layer in enumerate(card.layers):
        _set(card, f"layers.{i}.residual.multiplier", res, f"config:{r_where}")
        if layer.mixer.kind in ("gqa", "mha", "mqa"):
            scale, s_where = att, a_where
            if scale is None and (by_depth or unscaled) and layer.mixer.head_dim:
                scale = (1.0 if unscaled else layer.mixer.head_dim ** -0.5) / ((i + 1) if by_depth else 1)
                s_where = "scale_attn_by_inverse_layer_idx" if by_depth else "scale_attn_weights"
            _set(card, f"layers.{i}.mixer.scale", scale, f"config:{s_where}")
            _set(card, f"layers.{i}.mixer.clip_qkv", clip, f"config:{c_where}")


def _from_config(card: Card, cfg: ConfigView, n_where: str | None) -> None:
    """What shapes cannot say: rope, eps, activation, top-k, scoring, windows, soft-caps, embedding scale."""
    mp, where = cfg.first_int_at("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
    _set(card, "max_position_embeddings", mp, f"config:{where}")
    eps = norm_eps(cfg)
    if eps is not None:
        card.final_norm.eps = eps
    if cfg.default("norm_offset"):
        _set(card, "final_norm.offset", True, "default")
    elif plain_gain_source(cfg.model_type):   # transformers applies this family's gains as w: say so
        _set(card, "final_norm.offset", False, "default")
    soft, where = cfg.first_float_at("final_logit_softcapping", "logits_soft_cap")
    _set(card, "head.soft_cap", soft, f"config:{where}")
    if cfg.default("embed_scale") == "sqrt_hidden" and card.hidden_size:
        _set(card, "embed.scale", math.sqrt(card.hidden_size), "default")
    if cfg.default("embed_scale") == "sqrt_hidden_bf16" and card.hidden_size:   # RecurrentGemma's bf16 buffer
        _set(card, "embed.scale", _bf16(math.sqrt(card.hidden_size)), "default")
    mult, where = cfg.first_float_at("embedding_multiplier", "scale_emb")
    _set(card, "embed.scale", mult, f"config:{where}")
    _scales(card, cfg)
    alibi = cfg.get("alibi") is True or bool(cfg.default("alibi"))
    if alibi:
        _set(card, "embed.pos_kind", "alibi", "config:alibi" if cfg.get("alibi") is True else "default")
    derive_positions(card, cfg)      # rope (model and per layer), NoPE layers, sinusoidal positions
    act, act_where = cfg.first_str_at("hidden_act", "hidden_activation", "activation_function", "mlp_hidden_act",
                                      "ffn_act_fn", "activation", "afn")
    if act is None and isinstance(cfg.get("ffn_act_fn"), dict):      # DBRX: ffn_config.ffn_act_fn {"name": ...}
        name = cfg.get("ffn_act_fn").get("name")
        act, act_where = (name, "ffn_act_fn.name") if isinstance(name, str) and name else (None, None)
    if act is None and cfg.default("activation"):    # hard-coded in the modeling file (CTRL's ReLU, LFM2's SiLU)
        act, act_where = cfg.default("activation"), None
    top_k, k_where = cfg.first_int_at("num_experts_per_tok", "num_experts_per_token", "experts_per_token", "moe_top_k",
                                      "moe_topk", "top_k",
                                      "moe_k",
                                      "num_selected_experts")
    scoring, s_where = cfg.first_str_at("scoring_func", "moe_router_activation_func", "router_activation",
                                        "score_function", "expert_selection_fn")
    renorm = cfg.get("norm_topk_prob", cfg.get("moe_renormalize"))
    scale, sc_where = cfg.first_float_at("routed_scaling_factor", "router_scaling_factor", "route_scale")
    jitter, j_where = cfg.first_float_at("router_jitter_noise")
    glu_limit = cfg.first_float("swiglu_limit")
    p_norm, pn_where = cfg.lookup("moe_normalize_expert_weights")
    chunk = cfg.first_int("attention_chunk_size")
    topk_method = cfg.get("topk_method")
    n_group, g_where = cfg.first_int_at("n_group", "num_expert_group")
    topk_group, tg_where = cfg.first_int_at("topk_group")
    n_shared, sh_where = cfg.first_int_at("n_shared_experts", "num_shared_experts", "shared_expert_count")
    listed, l_where = cfg.lookup("sliding_window")
    listed = listed if isinstance(listed, list) else None
    window, w_where = cfg.first_int_at("attention_window_size") if listed else cfg.first_int_at(
        "sliding_window", "attention_window_size")
    types = cfg.get("layer_types")
    if not isinstance(types, list) and isinstance(cfg.get("attention_layers"), list):   # GPT-Neo: global / local
        types = cfg.get("attention_layers")
        if window is None:
            window, w_where = cfg.first_int_at("window_size")
    attn_cap, ac_where = cfg.first_float_at("attn_logit_softcapping")
    gate_lb = cfg.first_float("gate_lower_bound")
    if listed is not None:
        windows = listed_windows(cfg, len(card.layers), listed, l_where)
    else:
        windows = layer_windows(cfg, len(card.layers), window, w_where, types)
    assumed = [i for i, w in enumerate(windows) if w and w[1] == "assumed"
               and card.layers[i].mixer.kind in ("gqa", "mha", "mqa", "mla", "lowrank_kv")]
    if assumed and listed is not None:
        card.warnings.append(f"assumed: {l_where} lists {len(listed)} windows for {len(card.layers)} layers, "
                             f"repeated over the layers (vLLM's interleaved reading): layer i takes entry "
                             f"i mod {len(listed)}")
    elif assumed:
        card.warnings.append(f"assumed: sliding_window {window} on all {len(assumed)} attention layers "
                             f"(model_type {cfg.model_type!r} has no family row and no layer_types or "
                             "use_sliding_window key; transformers' generic reading)")
    for i, layer in enumerate(card.layers):
        p = f"layers.{i}"
        m, f = layer.mixer, layer.ffn
        if m.kind in ("gqa", "mha", "mqa", "mla", "lowrank_kv"):
            if windows[i] is not None:
                _set(card, f"{p}.mixer.sliding_window", *windows[i])
            _set(card, f"{p}.mixer.logit_soft_cap", attn_cap, f"config:{ac_where}")
            if cfg.default("weightless_qk_norm") and m.qk_norm is None:   # nanochat: q/k RMSNorm after rope
                _set(card, f"{p}.mixer.qk_norm", "weightless", "default")
                _set(card, f"{p}.mixer.qk_norm_after_rope", True, "default")
            if cfg.default("attn_scale") is not None and m.scale is None:
                _set(card, f"{p}.mixer.scale", float(cfg.default("attn_scale")), "default")
            if chunk and isinstance(types, list) and len(types) == len(card.layers) and "chunked" in str(types[i]):
                _set(card, f"{p}.mixer.chunk_size", chunk, "config:attention_chunk_size")
            if alibi:
                _set(card, f"{p}.mixer.alibi", True, "default")
                if cfg.default("alibi_scaled"):
                    _set(card, f"{p}.mixer.alibi_scaled", True, "default")
        if m.kind == "mamba":      # RMS norms on dt, B, C: weightless (FalconMamba's mixer_rms_eps) or stored (Jamba)
            ssm_eps, se_where = cfg.first_float_at("mixer_rms_eps")
            if ssm_eps is None and f"{p}.mixer.dt_norm" in card.tensors:
                ssm_eps, se_where = cfg.first_float_at("rms_norm_eps", "layer_norm_epsilon", "norm_eps")
            _set(card, f"{p}.mixer.ssm_norm_eps", ssm_eps, f"config:{se_where}")
        if m.indexer is not None:     # DSA: keys per query (index_topk), a layer reusing the previous top-k
            _set(card, f"{p}.mixer.indexer.index_topk", cfg.first_int("index_topk"), "config:index_topk")
            itypes = cfg.get("indexer_types")
            if isinstance(itypes, list) and len(itypes) == len(card.layers) and itypes[i] == "shared":
                _set(card, f"{p}.mixer.indexer.shared", True, "config:indexer_types")
            _set(card, f"{p}.mixer.indexer.rope_interleaved", cfg.default("indexer_rope_interleaved"), "default")
        if m.kind == "gated_deltanet" and cfg.get("linear_allow_neg_eigval") is True:   # OLMo-hybrid: 2 sigmoid(b)
            _set(card, f"{p}.mixer.beta_scale", 2.0, "config:linear_allow_neg_eigval")
        if m.kind == "mamba2":
            if cfg.get("mamba_norm_before_gate") is True and f"{p}.mixer.norm" in card.tensors:
                m.layout["norm_before_gate"] = True
            mup = _mup_multipliers(cfg)
            if mup:
                m.layout["mup_multipliers"] = mup
        vscale = cfg.first_float("attention_value_scale")
        if m.kind in ("gqa", "mha", "mqa") and vscale is not None and vscale != 1:   # MiMo-V2-Flash: v * 0.707
            m.layout["value_scale"] = vscale
            card.origins[f"{p}.mixer.layout.value_scale"] = "config:attention_value_scale"
        if m.layout.get("head_gate") and cfg.default("head_gate_act"):     # a per-head output gate's activation
            m.layout["head_gate_act"] = cfg.default("head_gate_act")
            card.origins[f"{p}.mixer.layout.head_gate_act"] = "default"
        if m.kind in ("gated_deltanet", "lightning"):
            _set(card, f"{p}.mixer.norm_eps", cfg.default("linear_norm_eps"), "default")
        if cfg.default("residual_from_norm"):
            _set(card, f"{p}.residual.kind", "from_norm", "default")
            scales, where = _from_norm_scales(cfg, m.kind)
            if scales is not None:
                _set(card, f"{p}.residual.scales", scales, where)
        elif cfg.get("apply_residual_connection_post_layernorm") is True:   # BLOOM, ChatGLM: residual = n(x)
            _set(card, f"{p}.residual.kind", "from_norm", "config:apply_residual_connection_post_layernorm")
        if m.kind == "moa":   # JetMoE's attention experts take the same top-k as its FFN experts
            _set(card, f"{p}.mixer.top_k", top_k, f"config:{k_where}")
            card.origins.setdefault(f"{p}.mixer.num_experts", "shape")
        if m.kind == "kda" and gate_lb is not None:
            card.origins[f"{p}.mixer.gate_lower_bound"] = "config:gate_lower_bound"
        for name in ("num_heads", "num_kv_heads", "head_dim", "kv_lora_rank", "rope_dim", "cache_width_per_token",
                     "conv_dim", "conv_kernel", "q_lora_rank", "dt_rank"):
            if getattr(m, name) is not None:
                card.origins.setdefault(f"{p}.mixer.{name}", "shape")
        if f.kind != "none" and act:
            a = act.lower()
            _set(card, f"{p}.ffn.activation", a, f"config:{act_where}" if act_where else "default")
        if f.kind != "none" and glu_limit is not None and f.gated:   # gpt-oss's clamped SwiGLU
            _set(card, f"{p}.ffn.activation", "swiglu_oss", "config:swiglu_limit")
            _set(card, f"{p}.ffn.glu_limit", glu_limit, "config:swiglu_limit")
            _set(card, f"{p}.ffn.glu_alpha", cfg.first_float("swiglu_alpha"), "config:swiglu_alpha")
        if f.kind in ("moe", "latent_moe"):
            _set(card, f"{p}.ffn.top_k", top_k, f"config:{k_where}")
            if scoring:
                _set(card, f"{p}.ffn.router.scoring", "sigmoid" if "sigmoid" in scoring.lower() else "softmax",
                     f"config:{s_where}")
            elif cfg.default("scoring"):
                _set(card, f"{p}.ffn.router.scoring", cfg.default("scoring"), "default")
            elif f.router.selection_bias is not None:
                # a selection bias goes with sigmoid scores (DeepSeek-V3 and its descendants), softmax otherwise
                _set(card, f"{p}.ffn.router.scoring", "sigmoid" if f.router.selection_bias else "softmax", "default")
            if s_where == "expert_selection_fn" and scoring == "softmax":   # a softmax over the top-k logits
                _set(card, f"{p}.ffn.router.renormalize", True, "config:expert_selection_fn")
            elif isinstance(renorm, bool) and not cfg.default("norm_topk_prob_ignored"):
                _set(card, f"{p}.ffn.router.renormalize", renorm, "config:norm_topk_prob")
            elif p_norm == 1:   # DBRX: weights / ||weights||_p, and p = 1 is the sum (other p: unknown)
                _set(card, f"{p}.ffn.router.renormalize", True, f"config:{pn_where}")
            elif isinstance(cfg.default("renormalize"), bool):
                _set(card, f"{p}.ffn.router.renormalize", cfg.default("renormalize"), "default")
            if cfg.default("router_bias_on") and f.router.selection_bias:
                _set(card, f"{p}.ffn.router.bias_on", cfg.default("router_bias_on"), "default")
            if cfg.default("router_weight_on"):
                _set(card, f"{p}.ffn.router.weight_on", cfg.default("router_weight_on"), "default")
            if card.layers[i].ffn.router.scoring == "sparsemixer":
                _set(card, f"{p}.ffn.router.sparsemixer_eps", jitter, f"config:{j_where}")
            _set(card, f"{p}.ffn.router.scaling", scale, f"config:{sc_where}")
            if topk_method != "greedy":   # DeepSeek-V2's `greedy` ignores n_group / topk_group
                _set(card, f"{p}.ffn.router.n_group", n_group, f"config:{g_where}")
                _set(card, f"{p}.ffn.router.topk_group", topk_group, f"config:{tg_where}")
            if topk_method in GROUP_SCORES:
                _set(card, f"{p}.ffn.router.group_score", GROUP_SCORES[topk_method], "config:topk_method")
            if f.shared is not None and n_shared:
                _set(card, f"{p}.ffn.shared.count", n_shared, f"config:{sh_where}")
            if f.shared is not None and cfg.get("shared_expert_combination_strategy") in ("sum", "average"):
                _set(card, f"{p}.ffn.shared.combine", cfg.get("shared_expert_combination_strategy"),
                     "config:shared_expert_combination_strategy")
            if f.layout.get("gate_up") and cfg.default("gate_up"):
                f.layout["gate_up"] = cfg.default("gate_up")
            for name in ("num_experts", "expert_width", "latent_size"):
                if getattr(f, name) is not None:
                    card.origins.setdefault(f"{p}.ffn.{name}", "shape")
        if m.layout.get("qkv_interleaved"):
            card.origins[f"{p}.mixer.layout.qkv_interleaved"] = "default"
        for place, norm in layer.norm.items():
            if norm.offset:
                card.origins[f"{p}.norm.{place}.offset"] = "default"
            elif norm.offset is None and plain_gain_source(cfg.model_type):
                norm.offset = False
                card.origins[f"{p}.norm.{place}.offset"] = "default"
            if f"{p}.norm.{place}" not in card.tensors:
                card.origins[f"{p}.norm.{place}.kind"] = "default"
        if layer.parallel is None and cfg.default("parallel") and len(layer.norm) == 1:
            _set(card, f"{p}.parallel", True, "default")
    _llama4_attention(card, cfg)
    if n_where and card.num_layers is not None:
        n, _ = cfg.first_int_at("num_hidden_layers", "n_layer", "num_layers", "n_layers")
        if n is not None and n != card.num_layers and not any("config says" in w for w in card.warnings):
            card.warnings.append(f"config says {n} layers, the checkpoint has tensors for {card.num_layers}: "
                                 "the card follows the tensors")


def _llama4_attention(card: Card, cfg: ConfigView) -> None:
    """`use_qk_norm` on a layer with no q/k norm tensor: a weightless RMS norm of q and k (Llama 4's L2
    norm; rope rotates within the head, so before or after rope is the same); the family row
    `qk_norm_rope_layers` keeps it to the layers that rotate. (The NoPE layers' temperature tuning is a
    query_scale, structure/positions.py.)"""
    for i, layer in enumerate(card.layers):
        m = layer.mixer
        if m.kind not in ("gqa", "mha", "mqa"):
            continue
        p = f"layers.{i}.mixer"
        rotates = m.rope is not False and card.embed.pos_kind == "rope"
        if cfg.get("use_qk_norm") is True and m.qk_norm is None and f"layers.{i}.mixer.q_norm" not in card.tensors \
                and (rotates or not cfg.default("qk_norm_rope_layers")):
            _set(card, f"{p}.qk_norm", "weightless", "config:use_qk_norm")
