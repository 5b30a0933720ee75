"""Multi-head latent attention (DeepSeek-V2/V3, Kimi Linear, K3 Gated MLA) with checkpoint names.

spec/kimi-k3.md section 2.1(b). q = q_b_proj(q_a_layernorm(q_a_proj x)) (or q_proj x without q-LoRA);
[c_kv | k_rope] = kv_a_proj_with_mqa x; c_kv = kv_a_layernorm(c_kv); [k_nope | v] = kv_b_proj c_kv.
Scores over [q_nope | q_rope] . [k_nope | k_rope] / sqrt(N + R). `rope_theta=None` is NoPE (K3 and
Kimi Linear keep the R "rope" dims but never rotate them). `output_gate=True` is K3's Gated MLA:
o *= sigmoid(g_proj x) before o_proj; `head_gate_act="sigmoid"` is Ling 3's one gate per head
(`head_gate_proj` [heads, H]). The cache stores only c_kv and k_rope: r + R values per
token, shared by all heads. `form` picks the naive or the absorbed algorithm (ops/mla.py); both give the same result.
The two latent norms use eps 1e-6 as the official code does. An `indexer` (archprobe.nn.dynamic.Indexer
reading the q-LoRA latent: DeepSeek-V3.2's DSA) limits each query to its top-k keys; its keys are cached.
"""

from __future__ import annotations

import torch
from torch import nn

from archprobe.nn.cache import MLACache, causal_mask
from archprobe.nn.norm import RMSNorm
from archprobe.nn.rope import Rope
from archprobe.ops.mla import mla_absorbed, mla_naive


class MultiHeadLatentAttention(nn.Module):
    def __init__(self, hidden: int, heads: int, *, kv_lora_rank: int, q_lora_rank: int | None, nope_dim: int,
                 rope_dim: int, v_dim: int, rope_theta: float | None = None, rope_interleaved: bool = False,
                 output_gate: bool = False, latent_eps: float = 1e-6, form: str = "naive", softmax_scale=None,
                 rope: Rope | None = None, indexer=None, head_gate_act: str | None = None):
        """`rope` (scaled frequencies, e.g. DeepSeek-V3's YaRN) replaces `rope_theta`/`rope_interleaved`."""
        super().__init__()
        if rope is None and rope_theta is not None:
            rope = Rope(rope_theta, rope_dim, interleaved=rope_interleaved)
        self.rope_spec = rope
        self.heads, self.nope, self.rope, self.vdim, self.r = heads, nope_dim, rope_dim, v_dim, kv_lora_rank
        self.rope_theta, self.rope_interleaved, self.form = rope_theta, rope_interleaved, form
        self.scale = softmax_scale or (nope_dim + rope_dim) ** -0.5
        qk = heads * (nope_dim + rope_dim)
        if q_lora_rank:
            self.q_a_proj = nn.Linear(hidden, q_lora_rank, bias=False)
            self.q_a_layernorm = RMSNorm(q_lora_rank, eps=latent_eps)
            self.q_b_proj = nn.Linear(q_lora_rank, qk, bias=False)
        else:
            self.q_proj = nn.Linear(hidden, qk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(hidden, kv_lora_rank + rope_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(kv_lora_rank, eps=latent_eps)
        self.kv_b_proj = nn.Linear(kv_lora_rank, heads * (nope_dim + v_dim), bias=False)
        if output_gate:
            self.g_proj = nn.Linear(hidden, heads * v_dim, bias=False)
        self.o_proj = nn.Linear(heads * v_dim, hidden, bias=False)
        self.indexer = indexer
        if head_gate_act is not None:
            from archprobe.nn.attention import HEAD_GATE_ACTS

            self.head_gate_proj = nn.Linear(hidden, heads, bias=False)
            self.head_gate_act = HEAD_GATE_ACTS[head_gate_act]

    def forward(self, x: torch.Tensor, cache: MLACache | None = None, use_cache: bool = False):
        B, T, _ = x.shape
        q_resid = self.q_a_layernorm(self.q_a_proj(x)) if hasattr(self, "q_a_proj") else None
        q = self.q_b_proj(q_resid) if q_resid is not None else self.q_proj(x)
        q = q.unflatten(-1, (self.heads, self.nope + self.rope))
        q_nope, q_rope = q.split([self.nope, self.rope], dim=-1)
        ckv, krope = self.kv_a_proj_with_mqa(x).split([self.r, self.rope], dim=-1)
        ckv = self.kv_a_layernorm(ckv)
        start = cache.length if cache is not None else 0
        if self.rope_spec is not None:
            pos = torch.arange(start, start + T, device=x.device)
            q_rope = self.rope_spec.apply(q_rope, pos)
            krope = self.rope_spec.apply(krope.unsqueeze(2), pos).squeeze(2)
        if cache is not None:
            ckv = torch.cat([cache.ckv, ckv], dim=1)
            krope = torch.cat([cache.krope, krope], dim=1)
        mask = causal_mask(T, ckv.shape[1], x.device)
        ikeys = None
        if self.indexer is not None:
            pos = torch.arange(start, start + T, device=x.device)
            ikeys = self.indexer.keys(x, pos)
            if cache is not None and cache.index_keys is not None:
                ikeys = torch.cat([cache.index_keys, ikeys], dim=1)
            mask = self.indexer.select(x, ikeys, mask, q_in=q_resid, positions=pos)[:, None]   # [B, 1, T, S]
        attend = mla_absorbed if self.form == "absorbed" else mla_naive
        o = attend(q_nope, q_rope, ckv, krope, self.kv_b_proj.weight, mask, self.scale).to(x.dtype)
        if hasattr(self, "g_proj"):
            o = o * torch.sigmoid(self.g_proj(x).float()).unflatten(-1, (self.heads, self.vdim)).to(x.dtype)
        if hasattr(self, "head_gate_proj"):
            o = o * self.head_gate_act(self.head_gate_proj(x).float()).to(x.dtype).unsqueeze(-1)
        new_cache = MLACache(ckv, krope, ikeys) if (use_cache or cache is not None) else None
        return self.o_proj(o.flatten(-2)), new_cache
