"""Design trade-offs computed from the card (`memory --tradeoffs`): each row a formula, its numbers, and the
break-even. The seed's question: latent routing saves expert work but adds two projections and a matmul; whether
it pays depends on expert count, latent width and batch size. Counterfactuals keep everything else equal.
"""

from __future__ import annotations

import math

from archprobe.kinds.formulas import dtype_bytes, linear_state
from archprobe.memory.plan import _model_dtype, card_of

BATCHES = (1, 8, 64, 512)


def experts_touched(E: int, k: int, B: int) -> float:
    """Expected distinct experts a batch of B tokens routes to (uniform routing): E (1 - (1 - k/E)^B)."""
    return E * (1 - (1 - k / E) ** B)


def latent_moe(card, doc: dict | None = None) -> dict | None:
    f = next((layer.ffn for layer in card.layers if layer.ffn.kind == "latent_moe"), None)
    if f is None or not (f.latent_size and f.expert_width and f.num_experts and card.hidden_size):
        return None
    H, lat, w, E, k = card.hidden_size, f.latent_size, f.expert_width, f.num_experts, f.top_k or 1
    mats = 3 if f.gated is not False else 2
    n = sum(1 for layer in card.layers if layer.ffn.kind == "latent_moe")
    eb = pb = 2.0                 # bytes / parameter of experts and projections: the stored ratios where known
    if doc:
        comps, params = doc["params"].get("stored_bytes_by_component", {}), doc["params"]["by_component"]
        if params.get("routed_experts"):
            eb = comps.get("routed_experts", 0) / params["routed_experts"] or 2.0
        if params.get("latent_projections"):
            pb = comps.get("latent_projections", 0) / params["latent_projections"] or 2.0
    lat_params = E * mats * lat * w + 2 * H * lat
    tok_params = E * mats * H * w
    lat_flops = 2 * (k * mats * lat * w + 2 * H * lat)
    tok_flops = 2 * k * mats * H * w
    numbers = {"layers": n, "hidden": H, "latent": lat, "experts": E, "top_k": k, "expert_width": w,
               "params_latent_per_layer": lat_params, "params_token_space_per_layer": tok_params,
               "flops_per_token_latent": lat_flops, "flops_per_token_token_space": tok_flops,
               "expert_bytes_per_param": round(eb, 4), "projection_bytes_per_param": round(pb, 4)}
    for B in BATCHES:
        t = experts_touched(E, k, B)
        numbers[f"expert_bytes_per_token_latent_B{B}"] = (t * mats * lat * w * eb + 2 * H * lat * pb) / B
        numbers[f"expert_bytes_per_token_token_space_B{B}"] = t * mats * H * w * eb / B
    gain = mats * w * (H - lat)                   # per expert kept latent
    k_even = 2 * H * lat / gain if gain > 0 else math.inf
    b_even = next((B for B in range(1, 1 << 16)
                   if experts_touched(E, k, B) * gain * eb >= 2 * H * lat * pb), None) if gain > 0 else None
    return {"name": "LatentMoE vs token-space MoE (same experts, top-k, expert width)",
            "formula": "params: E*m*l*w + 2*H*l vs E*m*H*w; FLOPs/token: 2(k*m*l*w + 2*H*l) vs 2*k*m*H*w; expert "
                       "bytes per token at batch B: (E(1-(1-k/E)^B)*m*l*w*b_e + 2*H*l*b_p) / B vs "
                       "E(1-(1-k/E)^B)*m*H*w*b_e / B (m = 3 gated matrices)",
            "numbers": numbers,
            "break_even": (f"FLOPs: latent pays once top_k > 2*H*l / (m*w*(H-l)) = {k_even:.3g} (here top_k {k}); "
                           f"bytes read: from batch {b_even} on" if gain > 0 else
                           "the latent is not narrower than the hidden size: never pays")}


def mla_vs_gqa(card, kv_b: float) -> dict | None:
    m = next((layer.mixer for layer in card.layers if layer.mixer.kind == "mla"), None)
    if m is None or not m.num_heads:
        return None
    h = m.num_heads
    qk = (m.nope_dim or m.head_dim or 0) + (m.rope_dim or 0)
    v = m.v_head_dim or m.nope_dim or m.head_dim or 0
    latent = m.cache_width_per_token or ((m.kv_lora_rank or 0) + (m.rope_dim or 0))
    mla = latent * kv_b
    mha = h * (qk + v) * kv_b
    gqa8 = min(8, h) * (qk + v) * kv_b
    return {"name": "MLA latent cache vs the MHA / GQA cache it replaces (per token, per layer)",
            "formula": "MLA: (kv_lora_rank + rope_dim) * b; MHA: heads * (qk_dim + v_dim) * b; GQA-g: g * (qk_dim + "
                       "v_dim) * b",
            "numbers": {"mla_bytes": mla, "mha_bytes": mha, "gqa8_bytes": gqa8, "mha_over_mla": mha / mla,
                        "gqa8_over_mla": gqa8 / mla},
            "break_even": f"GQA matches MLA at {latent / (qk + v):.3g} KV heads (latent {latent} / (qk {qk} + "
                          f"v {v})); MLA's cache is replicated on every TP rank while MHA's splits by heads: "
                          f"the per-rank MHA cache is smaller only past TP {mha / mla:.3g}"}


def kda_vs_mla(card, kv_b: float, state_b: float, act_b: float) -> dict | None:
    k = next((layer.mixer for layer in card.layers if layer.mixer.kind == "kda"), None)
    m = next((layer.mixer for layer in card.layers if layer.mixer.kind == "mla"), None)
    if k is None or m is None or not k.num_heads:
        return None
    h, d = k.num_heads, k.head_dim
    state = linear_state(h, d, d, 3 * h * d, k.conv_kernel or 4, state_b, act_b)
    per_token = (m.cache_width_per_token or 0) * kv_b
    cross = state / per_token if per_token else math.inf
    return {"name": "KDA state vs an MLA cache in the same layer (per sequence)",
            "formula": "KDA: heads*d_k*d_v*b_state + (kernel-1)*3*heads*d*b_act, constant in T; MLA: (kv_lora_rank + "
                       "rope_dim) * b_kv * T",
            "numbers": {"kda_state_bytes": state, "mla_bytes_per_token": per_token,
                        "kda_layers": sum(1 for layer in card.layers if layer.mixer.kind == "kda")},
            "break_even": f"crossover at T = {cross:,.0f} tokens: beyond it the KDA layer holds less than an MLA layer"}


def attnres_bank(card, context: int, act_b: float, chunk: int = 2048) -> dict | None:
    ar = [layer.residual for layer in card.layers if layer.residual.kind == "attnres"]
    if not ar or not card.hidden_size:
        return None
    sources = math.ceil(len(card.layers) / (ar[0].block_size or 1)) + 1
    H = card.hidden_size
    train = sources * context * H * act_b
    infer = sources * min(chunk, context) * H * act_b
    decode = sources * H * act_b
    return {"name": "AttnRes bank: training vs inference (per sequence)",
            "formula": "sources = ceil(layers / block) + 1; training keeps sources * T * H * b for the backward; "
                       "prefill holds sources * chunk * H * b; decode sources * H * b per token",
            "numbers": {"sources": sources, "training_bytes": train, "prefill_bytes": infer,
                        "decode_bytes_per_token": decode, "context": context},
            "break_even": f"training costs T / chunk = {context / min(chunk, context):.3g}x the prefill bank; "
                          "inference never needs more than one chunk"}


def tradeoffs(doc: dict, context: int, batch: int = 1, card=None) -> list[dict]:
    card = card_of(doc, card)
    b = dtype_bytes(_model_dtype(doc))
    rows = [latent_moe(card, doc), mla_vs_gqa(card, b), kda_vs_mla(card, b, 4, b), attnres_bank(card, context, b)]
    return [r for r in rows if r is not None]
