"""Softmax attention: MHA / GQA / MQA with a KV cache, and the seed's variants built on it.

Switches (each as the families that use it store it): RoPE (`archprobe.nn.rope.Rope`: scaled, partial,
halves or interleaved) or none; ALiBi (Press et al., arXiv:2108.12409; BLOOM, MPT); a sliding window;
q/k/v and o biases; q/k norms per head (Qwen3, Gemma 3) or over the whole projection (OLMo 2); an
attention-logit soft-cap (Gemma 2: cap * tanh(s / cap)); learned attention sinks (gpt-oss: one extra
logit per head that takes probability mass and returns nothing); a softmax scale other than
1/sqrt(d) (Gemma's query_pre_attn_scalar, Granite's attention_multiplier); a sigmoid output gate
`g_proj` (gated attention); a position-dependent query scale (`query_scale_at`: Llama 4's temperature
tuning and Ministral 3's llama_4_scaling_beta, SSMax on Beam's NoPE layers); dynamic allocation by
`HeadGate` or `Indexer` (archprobe.nn.dynamic);
differential attention (Ye et al., arXiv:2410.05258; DiffLlama): two softmax maps per head pair,
(A1 - lambda A2) V, lambda = exp(lq1.lk1) - exp(lq2.lk2) + lambda_init, then a weightless RMSNorm over
the pair's 2d channels times (1 - lambda_init).
chunked attention (Llama 4: a query sees only the earlier keys of its own `chunk`-token block); weightless
q/k RMS norms (`qk_norm="weightless"`, Llama 4's L2 norm).
With a window the cache keeps only the last `window` keys. Fused qkv checkpoints are split on load.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from archprobe.nn.cache import KVCache, causal_mask
from archprobe.nn.dynamic import HeadGate, Indexer
from archprobe.nn.norm import make_norm, rms_normalise
from archprobe.nn.rope import Rope

HEAD_GATE_ACTS = {"sigmoid": torch.sigmoid, "softplus": torch.nn.functional.softplus}


def alibi_slopes(heads: int, max_bias: float = 8.0) -> torch.Tensor:
    """Per-head ALiBi slopes: the geometric sequence 2^(-max_bias k / n) for the nearest power of two
    n <= heads, then the odd terms of the 2n sequence for the remaining heads (BLOOM and MPT agree)."""
    n = 2 ** math.floor(math.log2(heads))
    slopes = [2.0 ** (-max_bias * k / n) for k in range(1, n + 1)]
    slopes += [2.0 ** (-max_bias * k / (2 * n)) for k in range(1, 2 * (heads - n), 2)]
    return torch.tensor(slopes, dtype=torch.float32)


def sdpa(q_BTHD, k_BSGD, v_BSGD, mask, scale: float, *, softcap: float | None = None, sinks_H=None,
         bias_HTS=None):
    """Grouped attention in float32; mask [T, S] or [B, T, S] boolean. `softcap` caps the scaled
    logits, `bias_HTS` is added after (ALiBi), `sinks_H` adds one logit column per head, dropped after
    the softmax."""
    H, G = q_BTHD.shape[2], k_BSGD.shape[2]
    k = k_BSGD.float().repeat_interleave(H // G, dim=2)
    v = v_BSGD.float().repeat_interleave(H // G, dim=2)
    scores = torch.einsum("bthd,bshd->bhts", q_BTHD.float(), k) * scale
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    if bias_HTS is not None:
        scores = scores + bias_HTS
    m = mask[:, None] if mask.dim() == 3 else mask
    scores = scores.masked_fill(~m, float("-inf"))
    if sinks_H is not None:
        B, _, T, _ = scores.shape
        sink = sinks_H.float().reshape(1, H, 1, 1).expand(B, H, T, 1)
        probs = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    else:
        probs = torch.softmax(scores, dim=-1)
    return torch.einsum("bhts,bshd->bthd", probs, v)


QUERY_SCALES = ("ssmax", "log_floor")


def query_scale_at(spec: dict, t: torch.Tensor) -> torch.Tensor:
    """The query multiplier at absolute positions t [T] (float32):
    `ssmax` (Beam): (1 + (t + 1) / length) ** power;
    `log_floor` (Llama 4's temperature tuning on NoPE layers, shift 1; Ministral 3's llama_4_scaling_beta
    with the rope's original context, shift 0): 1 + beta * log(1 + floor((t + shift) / length))."""
    if spec["form"] == "ssmax":
        return torch.exp(float(spec["power"]) * torch.log1p((t + 1) / float(spec["length"])))
    return 1 + float(spec["beta"]) * torch.log1p(torch.floor((t + float(spec.get("shift", 0))) / float(spec["length"])))


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, *, rope_theta: float | None = 10000.0,
                 window: int | None = None, qk_norm: bool | str = False, output_gate: bool = False,
                 head_gate: HeadGate | None = None, indexer: Indexer | None = None, norm_eps: float = 1e-6,
                 gate_in_q: bool = False, rotary_dim: int | None = None, norm_style: str = "standard",
                 rope: Rope | None = None, qkv_bias: bool = False, o_bias: bool = False, scale: float | None = None,
                 softcap: float | None = None, sinks: bool = False, alibi: bool = False,
                 qk_norm_after_rope: bool = False, differential: float | None = None,
                 query_scale: dict | None = None, clip_qkv: float | None = None, sub_norm: bool = False,
                 alibi_scaled: bool = False, chunk: int | None = None, head_gate_act: str | None = None,
                 qk_norm_style: str | None = None, v_head_dim: int | None = None, value_scale: float | None = None):
        """`gate_in_q`: Qwen3-Next's gated attention, q_proj emits [q | gate] per head (no g_proj).
        `rope` (or `rope_theta` with `rotary_dim`, the default frequencies); `qk_norm`: True or `head`
        (one norm of head_dim shared by heads), `full` (one over the whole q / k projection),
        `per_head_weights` (each head its own gain, [heads, head_dim]: Cohere, StableLM-2-12B);
        `clip_qkv`: q, k, v projections clamped to [-c, c] (OLMo, DBRX; after a full q/k norm: OLMoE);
        `sub_norm`: a norm on the heads' output before o_proj (BitNet's attn_sub_norm); `alibi_scaled`: the
        ALiBi bias is added before the softmax scale and so scaled with the scores (Falcon), not after it (BLOOM, MPT).
        `differential`: this layer's lambda_init (differential attention, DiffLlama).
        `qk_norm` `weightless`: normalised, no gain (Llama 4). `chunk`: chunked attention. `qk_norm_style`: the
        q/k norms' kind when it is not `norm_style` (StableLM 2: bias-free per-head LayerNorms).
        `v_head_dim`: value heads narrower or wider than q/k heads (MiMo-V2-Flash: 192 vs 128); `value_scale`:
        values multiplied by it before attention (MiMo-V2-Flash's attention_value_scale)."""
        super().__init__()
        if heads % kv_heads:
            raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.v_head_dim, self.value_scale = v_head_dim or head_dim, value_scale
        vd = self.v_head_dim
        self.window, self.gate_in_q, self.softcap, self.clip_qkv = window, gate_in_q, softcap, clip_qkv
        if rope is None and rope_theta is not None and not alibi:
            rope = Rope(rope_theta, rotary_dim or head_dim)
        self.rope = rope
        self.scale = scale if scale is not None else head_dim ** -0.5
        self.q_proj = nn.Linear(hidden, heads * head_dim * (2 if gate_in_q else 1), bias=qkv_bias)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(hidden, kv_heads * vd, bias=qkv_bias)
        self.o_proj = nn.Linear(heads * vd, hidden, bias=o_bias)
        self.qk_norm = "head" if qk_norm is True else (qk_norm or None)
        self.qk_norm_after_rope = qk_norm_after_rope   # HunYuan normalises the rotated q and k
        if query_scale is None and rope is not None and rope.params.get("llama_4_scaling_beta"):
            orig = rope.params.get("original_max_position_embeddings") or rope.max_positions
            if not orig:
                raise ValueError("llama_4_scaling_beta needs the rope's original_max_position_embeddings")
            query_scale = {"form": "log_floor", "beta": float(rope.params["llama_4_scaling_beta"]),
                           "length": orig, "shift": 0}
        if query_scale is not None and query_scale.get("form") not in QUERY_SCALES:
            raise ValueError(f"query_scale form {query_scale.get('form')!r}: archprobe.nn knows {QUERY_SCALES}")
        self.query_scale = query_scale
        if self.qk_norm not in (None, "head", "full", "per_head_weights", "weightless"):
            raise ValueError(f"qk_norm must be 'head', 'full', 'per_head_weights' or 'weightless', not {qk_norm!r}")
        self.chunk, self.norm_eps = chunk, norm_eps
        if self.qk_norm == "weightless":
            self.q_norm = self.k_norm = lambda t: rms_normalise(t, norm_eps).to(t.dtype)
        elif self.qk_norm:
            full, own = self.qk_norm == "full", self.qk_norm == "per_head_weights"
            style = qk_norm_style or norm_style
            self.q_norm = make_norm(style, heads * head_dim if full else (heads, head_dim) if own else head_dim,
                                    norm_eps)
            self.k_norm = make_norm(style, kv_heads * head_dim if full else (kv_heads, head_dim) if own
                                    else head_dim, norm_eps)
        if sub_norm:
            self.sub_norm = make_norm(norm_style, heads * vd, norm_eps)
        if output_gate:
            self.g_proj = nn.Linear(hidden, heads * vd, bias=False)
        if sinks:
            self.sinks = nn.Parameter(torch.zeros(heads))
        if head_gate_act is not None:   # one gate per head on its output: sigmoid (LFM3) or softplus (Laguna)
            self.head_gate_proj = nn.Linear(hidden, heads, bias=False)
            self.head_gate_act = HEAD_GATE_ACTS[head_gate_act]
        self.differential, self.norm_eps = differential, norm_eps
        if differential is not None:
            if heads % 2 or kv_heads % 2 or output_gate or gate_in_q or head_gate is not None:
                raise ValueError("differential attention needs even heads and kv heads and no output gates")
            for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                setattr(self, name, nn.Parameter(torch.zeros(head_dim)))
        self.alibi = alibi   # slopes computed per call: nothing to load, nothing left on the meta device
        self.alibi_scaled = alibi_scaled
        self.gate = head_gate
        self.indexer = indexer

    def _qkv(self, x: torch.Tensor):
        q_gate = None
        q = self.q_proj(x)
        if self.gate_in_q:
            q, q_gate = q.unflatten(-1, (self.heads, 2 * self.head_dim)).chunk(2, dim=-1)
            q = q.flatten(-2)
        k, v = self.k_proj(x), self.v_proj(x)
        if self.qk_norm == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        if self.clip_qkv is not None:     # after a full-width q/k norm, as OLMoE clamps the normed states
            c = self.clip_qkv
            q, k, v = q.clamp(-c, c), k.clamp(-c, c), v.clamp(-c, c)
        q = q.unflatten(-1, (self.heads, self.head_dim))
        k = k.unflatten(-1, (self.kv_heads, self.head_dim))
        v = v.unflatten(-1, (self.kv_heads, self.v_head_dim))
        if self.value_scale is not None:
            v = v * self.value_scale
        if self.qk_norm in ("head", "per_head_weights", "weightless") and not self.qk_norm_after_rope:
            q, k = self.q_norm(q), self.k_norm(k)
        return q, k, v, q_gate

    def _differential(self, q, k, v_BSGD, mask):
        """[B, T, heads / 2, 2 d]: the value heads' halves against the same maps, heads paired first half
        against second half, combined with lambda, normed over 2d (DiffLlama's layout)."""
        va, vb = v_BSGD.chunk(2, dim=2)
        o1 = sdpa(q, k, torch.cat([va, va], dim=2), mask, self.scale, softcap=self.softcap)
        o2 = sdpa(q, k, torch.cat([vb, vb], dim=2), mask, self.scale, softcap=self.softcap)
        a1, a2 = torch.cat([o1, o2], dim=-1).chunk(2, dim=2)
        lam = (torch.exp((self.lambda_q1.float() * self.lambda_k1.float()).sum())
               - torch.exp((self.lambda_q2.float() * self.lambda_k2.float()).sum()) + self.differential)
        return rms_normalise(a1 - lam * a2, self.norm_eps) * (1 - self.differential)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, use_cache: bool = False):
        B, T, _ = x.shape
        q, k, v, q_gate = self._qkv(x)
        start = cache.pos if cache is not None else 0
        if self.rope is not None:
            pos = torch.arange(start, start + T, device=x.device)
            q, k = self.rope.apply(q, pos), self.rope.apply(k, pos)
        if self.qk_norm in ("head", "per_head_weights", "weightless") and self.qk_norm_after_rope:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.query_scale is not None:
            t = torch.arange(start, start + T, device=x.device, dtype=torch.float32)
            q = (q.float() * query_scale_at(self.query_scale, t)[None, :, None, None]).to(q.dtype)
        keys_idx = self.indexer.keys(x) if self.indexer is not None else None
        if cache is not None:
            k_all, v_all = torch.cat([cache.k, k], 1), torch.cat([cache.v, v], 1)
            if keys_idx is not None:
                keys_idx = torch.cat([cache.index_keys, keys_idx], 1)
        else:
            k_all, v_all = k, v
        S = k_all.shape[1]
        mask = causal_mask(T, S, x.device, self.window)
        if self.chunk:   # absolute positions: the cache holds every key of the sequence so far
            q_chunk = torch.arange(start, start + T, device=x.device) // self.chunk
            mask = mask & (q_chunk[:, None] == (torch.arange(start + T - S, start + T, device=x.device)
                                                // self.chunk)[None, :])
        if self.indexer is not None:
            mask = self.indexer.select(x, keys_idx, mask)
        bias = None
        if self.alibi:   # slope * (key position - query position); absolute positions
            q_pos = torch.arange(start, start + T, device=x.device)
            k_pos = torch.arange(start + T - S, start + T, device=x.device)
            slopes = alibi_slopes(self.heads).to(x.device)
            bias = slopes[:, None, None] * (k_pos[None, :] - q_pos[:, None]).float()
            if self.alibi_scaled:
                bias = bias * self.scale
        if self.differential is not None:
            o = self._differential(q, k_all, v_all, mask)
        else:
            o = sdpa(q, k_all, v_all, mask, self.scale, softcap=self.softcap, sinks_H=getattr(self, "sinks", None),
                     bias_HTS=bias)
        if self.gate is not None:
            o = o * self.gate(x).unsqueeze(-1)
        if q_gate is not None:
            o = o * torch.sigmoid(q_gate.float())
        if hasattr(self, "g_proj"):
            o = o * torch.sigmoid(self.g_proj(x).float()).unflatten(-1, (self.heads, self.v_head_dim))
        if hasattr(self, "head_gate_proj"):
            o = o * self.head_gate_act(self.head_gate_proj(x).float()).unsqueeze(-1)
        new_cache = None
        if use_cache or cache is not None:
            keep = slice(-self.window, None) if self.window else slice(None)
            new_cache = KVCache(k_all[:, keep], v_all[:, keep], start + T,
                                keys_idx[:, keep] if keys_idx is not None else None)
        o = o.to(x.dtype).flatten(-2)
        if hasattr(self, "sub_norm"):
            o = self.sub_norm(o)
        return self.o_proj(o), new_cache
