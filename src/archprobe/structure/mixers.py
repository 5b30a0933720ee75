"""Which token mixer a layer has, decided from tensor shapes first and names second.

* linear attention: `A_log` + `dt_bias`. Channel-wise `dt_bias` (heads x head_dim entries) fed by a
  low-rank pair ([r, H] then [heads*head_dim, r]) is KDA; a per-head `dt_bias` is Gated DeltaNet;
  a `D` skip vector is Mamba-2.
* low-rank KV compression: a projection from H to a width w much narrower than H, a norm of width
  r <= w, and an up-projection taking r; w > r means a decoupled rope part (MLA). Q-LoRA has the
  same shape pattern with w == r and is told apart by its up-projection feeding queries.
* softmax attention: q/k/v (separate or fused); K width < Q width means GQA, one KV head MQA.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archprobe.structure.config import ModelConfig
from archprobe.structure.evidence import cfg_ev, ev, find, matrices
from archprobe.structure.tensors import Entry

ROPE_MAX = 256  # the decoupled rope part of an MLA down-projection is at most this wide


@dataclass
class MixerFinding:
    kind: str                                   # kda, gated_deltanet, mamba2, mla, gqa, mha, mqa, unknown
    attrs: dict = field(default_factory=dict)
    evidence: list[dict] = field(default_factory=list)
    extras: dict[str, dict] = field(default_factory=dict)   # feature id -> {"attrs", "evidence"}
    confidence: float = 0.9
    claimed: set[str] = field(default_factory=set)   # layer suffixes this module owns


def _low_rank_triples(group: dict[str, Entry], H: int) -> list[tuple[Entry, Entry | None, Entry]]:
    """(down [w, H], norm [r] or None, up [X, r]) with w <= H/2: a rank bottleneck."""
    mats = matrices(group)
    norms = [e for e in group.values() if len(e.shape) == 1]
    out = []
    for down in mats:
        w, inp = down.shape
        if inp != H or w > H // 2:
            continue
        for up in mats:
            if up is down:
                continue
            r = up.shape[1]
            if r == w and up.shape[0] > w:
                norm = next((n for n in norms if n.shape[0] == r), None)
                out.append((down, norm, up))
            elif r < w <= r + ROPE_MAX and up.shape[0] > r:
                norm = next((n for n in norms if n.shape[0] == r), None)
                if norm is not None:
                    out.append((down, norm, up))
    return out


def _linear(group: dict[str, Entry], H: int, cfg: ModelConfig) -> MixerFinding | None:
    a_log, dt = find(group, "A_log"), find(group, "dt_bias")
    if a_log is None and dt is None:
        return None
    d_skip = find(group, "D")
    conv = next((e for e in group.values() if len(e.shape) == 3 and e.shape[1] == 1), None)
    kernel = conv.shape[-1] if conv is not None else cfg.get("short_conv_kernel_size") or cfg.get("conv_kernel")
    conv_dim = conv.shape[0] if conv is not None else None
    if d_skip is not None and len(d_skip.shape) == 1:
        heads = d_skip.shape[0]
        norm = find(group, "norm")
        d_inner = norm.shape[0] if norm is not None and len(norm.shape) == 1 else cfg.get("mamba_num_heads", 0) * (
            cfg.get("mamba_head_dim") or 0) or None
        groups = cfg.get("n_groups") or 1
        state = cfg.get("ssm_state_size") or (
            (conv_dim - d_inner) // (2 * groups) if conv_dim and d_inner and conv_dim > d_inner else None)
        f = MixerFinding("mamba2", {"num_heads": heads, "head_dim": d_inner // heads if d_inner else None,
                                    "state_size": state, "n_groups": groups, "conv_dim": conv_dim,
                                    "conv_kernel": kernel},
                         [ev(d_skip, "per-head D skip vector: the Mamba-2 signature")])
        if a_log is not None:
            f.evidence.append(ev(a_log, f"per-head A_log ({heads})"))
        return f
    dt_n = dt.info.numel if dt is not None else 0
    mats = matrices(group)
    pair = None
    for down in mats:
        if down.shape[1] == H and down.shape[0] <= H // 4:
            up = next((u for u in mats if u.shape == (dt_n, down.shape[0])), None)
            if up is not None and dt_n:
                pair = (down, up)
                break
    beta = next((m for m in mats if m.shape[1] == H and m.shape[0] < 1024 and m.shape[0] * 8 <= dt_n
                 and (pair is None or m is not pair[0])), None)
    if pair is not None:
        heads = beta.shape[0] if beta is not None else (cfg.get("num_heads") or cfg.num_heads)
        head_dim = dt_n // heads if heads else None
        gate = "full_rank" if find(group, "g_proj") is not None else (
            "low_rank" if find(group, "g_a_proj") is not None else None)
        f = MixerFinding("kda", {"num_heads": heads, "head_dim": head_dim, "conv_kernel": kernel,
                                 "gate_lower_bound": cfg.get("gate_lower_bound"), "output_gate": gate})
        f.evidence = [ev(dt, f"channel-wise dt_bias: {dt_n} = {heads} heads x {head_dim}"),
                      ev(pair[0], f"low-rank decay down-projection [{pair[0].shape[0]}, H]"),
                      ev(pair[1], "decay up-projection to heads x head_dim")]
        if beta is not None:
            f.evidence.append(ev(beta, f"write-strength (beta) projection [{beta.shape[0]}, H]"))
        if a_log is not None:
            used = f"; only the first {heads} used" if heads and a_log.info.numel > heads else ""
            f.evidence.append(ev(a_log, f"A_log ({a_log.info.numel} stored{used})"))
            f.attrs["a_log_stored"] = a_log.info.numel
        return f
    heads = dt_n or (a_log.info.numel if a_log is not None else None)
    f = MixerFinding("gated_deltanet", {"num_heads": heads, "head_dim": cfg.get("linear_key_head_dim"),
                                        "value_head_dim": cfg.get("linear_value_head_dim"), "conv_dim": conv_dim,
                                        "conv_kernel": kernel}, confidence=0.8)
    if dt is not None:
        f.evidence.append(ev(dt, f"per-head dt_bias ({dt_n}): scalar decay per head"))
    if a_log is not None:
        f.evidence.append(ev(a_log, "per-head A_log"))
    return f


def _attention(group: dict[str, Entry], H: int, cfg: ModelConfig) -> MixerFinding | None:
    f: MixerFinding | None = None
    triples = _low_rank_triples(group, H)
    kv = [t for t in triples if "kv" in t[0].suffix or t[0].shape[0] > t[2].shape[1]]
    kv.sort(key=lambda t: ("kv" not in t[0].suffix, "kv" not in t[2].suffix))  # names confirm
    if kv:
        down, norm, up = kv[0]
        r = up.shape[1]
        rope = down.shape[0] - r
        q_lora = next((t for t in triples if t is not kv[0] and t[0].shape[0] == t[2].shape[1]
                       and t[0] is not down), None)
        heads = cfg.num_heads
        if norm is None and rope == 0:  # a shared low-rank K/V projection without MLA's latent norm / rope key
            f = MixerFinding("lowrank_kv", {"ratio": round(r / H, 4), "rank": r, "cache_width_per_token": r,
                                            "num_heads": heads},
                             [ev(down, f"shared K/V down-projection H={H} -> {r}: cache width {r} vs hidden {H}"),
                              ev(up, f"up-projection from the {r}-wide latent")], confidence=0.75)
            return _finish(f, group, H, cfg)
        f = MixerFinding("mla", {"kv_lora_rank": r, "q_lora_rank": q_lora[2].shape[1] if q_lora else None,
                                 "rope_dim": rope, "cache_width_per_token": down.shape[0],
                                 "num_heads": heads}, confidence=0.95 if norm is not None else 0.75)
        f.evidence = [ev(down, f"KV down-projection H={H} -> {down.shape[0]} = latent {r} + rope {rope}")]
        if norm is not None:
            f.evidence.append(ev(norm, f"norm on the {r}-wide latent"))
        f.evidence.append(ev(up, f"up-projection from the {r}-wide latent to K/V of all heads"))
        if q_lora is not None:
            f.evidence.append(ev(q_lora[0], f"query low-rank down-projection (q-LoRA {q_lora[2].shape[1]})"))
        f.extras["attention.kv_compression"] = {"attrs": {"ratio": round(down.shape[0] / H, 4)},
                                                "evidence": [ev(down, f"cache width {down.shape[0]} vs hidden {H}")]}
    else:
        q = find(group, "q_proj", "query", "wq")
        k = find(group, "k_proj", "key", "wk")
        qkv = find(group, "qkv_proj", "query_key_value", "c_attn", "Wqkv", "wqkv")
        hd = cfg.head_dim
        nh = cfg.num_heads
        if q is not None and k is not None and len(q.shape) == 2 and len(k.shape) == 2:
            kv_heads = k.shape[0] // hd if hd else None
            f = MixerFinding("gqa", {"num_heads": nh, "num_kv_heads": kv_heads, "head_dim": hd})
            f.evidence = [ev(q, f"query projection [{q.shape[0]}, {q.shape[1]}]"),
                          ev(k, f"key projection [{k.shape[0]}, {k.shape[1]}]: {kv_heads} KV heads of {hd}")]
            if nh and hd and q.shape[0] == 2 * nh * hd:
                f.extras["attention.output_gate"] = {
                    "attrs": {"form": "fused_in_q_proj"},
                    "evidence": [ev(q, f"q_proj is 2 x heads x head_dim = {q.shape[0]}: a per-channel gate "
                                       "rides with the queries")]}
            low = [t for t in triples if t[0] is not q and t[0] is not k]
            if low:
                down = low[0][0]
                f.extras["attention.kv_compression"] = {
                    "attrs": {"ratio": round(down.shape[0] / H, 4)},
                    "evidence": [ev(down, "shared low-rank projection narrower than the hidden size")]}
        elif qkv is not None and len(qkv.shape) == 2:
            f = MixerFinding("gqa", {"num_heads": nh, "num_kv_heads": cfg.num_kv_heads, "head_dim": hd},
                             [ev(qkv, "fused QKV projection")], confidence=0.8)
        if f is not None:
            kvh, qh = f.attrs.get("num_kv_heads"), f.attrs.get("num_heads")
            if kvh and qh:
                f.kind = "mqa" if kvh == 1 else "mha" if kvh == qh else "gqa"
    if f is None:
        return None
    return _finish(f, group, H, cfg)


def _finish(f: MixerFinding, group: dict[str, Entry], H: int, cfg: ModelConfig) -> MixerFinding:
    """Output gate, head gate, sparse indexer and the output projection, for any softmax-attention kind."""
    gate = find(group, "g_proj")
    o = find(group, "o_proj", "out_proj", "wo", "dense")
    if gate is not None and len(gate.shape) == 2 and gate.shape[1] == H:
        f.extras["attention.output_gate"] = {
            "attrs": {"form": "sigmoid_g_proj"},
            "evidence": [ev(gate, f"g_proj [{gate.shape[0]}, H] beside o_proj: a gate on the attention output")]}
    nh = cfg.num_heads
    for e in matrices(group):
        if nh and e.shape == (nh, H) and "indexer" not in e.suffix and e is not gate:
            f.extras["attention.head_gate"] = {"attrs": {"gate_shape": list(e.shape)},
                                               "evidence": [ev(e, f"[{nh} heads, H]: an input-dependent "
                                                                  "per-head gate")]}
    idx = {r: e for r, e in group.items() if ".indexer." in "." + r}
    if idx:
        weights = next((e for r, e in idx.items() if "weights_proj" in r), None)
        wk = next((e for r, e in idx.items() if r.endswith(("wk.weight", "wk"))), None)
        f.extras["attention.sparse_indexer"] = {
            "attrs": {"index_topk": cfg.get("index_topk"),
                      "index_heads": cfg.get("index_n_heads") or (weights.shape[0] if weights else None),
                      "index_dim": wk.shape[0] if wk is not None and len(wk.shape) == 2 else cfg.get("index_head_dim")},
            "evidence": [ev(e, "learned indexer that selects which KV entries each query reads")
                         for e in list(idx.values())[:3]]}
    if o is not None:
        f.evidence.append(ev(o, "output projection"))
    return f


def analyse_mixer(group: dict[str, Entry], H: int, cfg: ModelConfig) -> MixerFinding:
    return _linear(group, H, cfg) or _attention(group, H, cfg) or MixerFinding(
        "unknown", {}, [ev(e, "unexplained attention-like tensor") for e in list(group.values())[:2]], confidence=0.3)


def nope_evidence(cfg: ModelConfig) -> dict | None:
    if cfg.get("mla_use_nope") is True:
        return cfg_ev("mla_use_nope", True, "no rotary embedding in MLA")
    if cfg.get("use_rope") is False or cfg.get("position_embedding_type") == "none":
        return cfg_ev("use_rope", cfg.get("use_rope"), "no rotary embedding")
    return None
