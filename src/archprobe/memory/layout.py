"""Parallel layouts read against the card: what tensor / expert / pipeline / data / decode-context parallelism
shards and what each replicates, and the divisibility every layout must meet (one line naming the fix).

Rules (one per component, printed with the plan):
  attention weights and KV heads      split by TP (KV heads replicated when TP exceeds them: one per rank)
  MLA / low-rank latent cache         replicated on every TP rank (one latent per token, shared by all heads);
                                      split over tokens by DCP (decode context parallel)
  KDA / Gated DeltaNet / Mamba states split by heads (channels) over TP
  routed experts                      whole experts over EP, else each expert split over TP; the engine may
                                      widen the MoE group to DP x TP (vLLM)
  shared experts, dense FFN, latent projections   split by TP
  router, norms, AttnRes queries      replicated
  embedding, LM head                  vocabulary split by TP, on the first / last pipeline stage
  decoder layers                      by PP stage (uneven stages allowed: --pp-layers 24,23,23,23)
  sequences                           by DP replica (each holds its own KV pool)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archprobe.errors import ArchprobeError

HEADED_STATES = ("kda", "gated_deltanet", "mamba2", "lightning")
CHANNEL_STATES = ("mamba", "rg_lru", "short_conv")
LATENT = ("mla", "lowrank_kv")
TP_SPLIT = ("attention", "shared_experts", "dense_ffn", "latent_projections", "embedding", "lm_head", "vision",
            "mtp")
REPLICATED = ("router", "norms", "attn_res", "residual", "other")


class LayoutError(ArchprobeError):
    pass


@dataclass
class Layout:
    tp: int = 1
    ep: int = 1
    pp: int = 1
    dp: int = 1
    dcp: int = 1
    pp_layers: tuple[int, ...] | None = None

    @property
    def devices(self) -> int:
        return self.tp * self.pp * self.dp

    def to_dict(self) -> dict:
        return {"tp": self.tp, "ep": self.ep, "pp": self.pp, "dp": self.dp, "dcp": self.dcp,
                **({"pp_layers": list(self.pp_layers)} if self.pp_layers else {})}

    def describe(self) -> str:
        parts = [f"{k.upper()}{v}" for k, v in (("tp", self.tp), ("ep", self.ep), ("pp", self.pp), ("dp", self.dp),
                                                 ("dcp", self.dcp)) if v > 1]
        return " x ".join(parts) or "one device"


def stages(num_layers: int, layout: Layout) -> list[range]:
    """Decoder layers per pipeline stage: the given split, else even with the remainder on the first stages."""
    if layout.pp_layers:
        counts = list(layout.pp_layers)
    else:
        base, extra = divmod(num_layers, layout.pp)
        counts = [base + (1 if s < extra else 0) for s in range(layout.pp)]
    out, start = [], 0
    for c in counts:
        out.append(range(start, start + c))
        start += c
    return out


def check(card, layout: Layout, devices: int | None = None, engine: str | None = None) -> None:
    """Every divisibility the layout needs, or a LayoutError that names the fix."""
    tp = layout.tp
    if devices is not None and layout.devices != devices:
        raise LayoutError(f"layout TP{tp} x PP{layout.pp} x DP{layout.dp} = {layout.devices} devices, not {devices}",
                          hint="make --tp x --pp x --dp equal --devices (or leave one out to be filled in)")
    if layout.dcp > 1 and tp % layout.dcp:
        raise LayoutError(f"--dcp {layout.dcp} does not divide --tp {tp}",
                          hint="decode context parallel splits a TP group: pick a --dcp that divides --tp")
    if layout.dcp > 1 and engine not in (None, "vllm"):
        raise LayoutError(f"--dcp is vLLM's decode context parallel; {engine} has none", hint="drop --dcp")
    n = len(card.layers)
    if layout.pp_layers:
        if len(layout.pp_layers) != layout.pp or sum(layout.pp_layers) != n or min(layout.pp_layers) < 1:
            raise LayoutError(f"--pp-layers {','.join(map(str, layout.pp_layers))} must be {layout.pp} positive "
                              f"counts summing to the model's {n} layers", hint="e.g. --pp-layers "
                              + ",".join(str(len(r)) for r in stages(n, Layout(pp=layout.pp))))
    elif layout.pp > n:
        raise LayoutError(f"--pp {layout.pp} exceeds the model's {n} layers", hint=f"use --pp {n} or fewer")
    for i, layer in enumerate(card.layers):
        for m in (layer.mixer, layer.parallel_mixer):
            if m is None:
                continue
            heads = m.num_heads
            if heads and m.kind not in CHANNEL_STATES and heads % tp:
                ok = [d for d in range(1, heads + 1) if heads % d == 0 and d <= 64]
                raise LayoutError(f"--tp {tp} does not divide layer {i}'s {heads} {m.kind} heads",
                                  hint=f"use --tp in {{{', '.join(map(str, ok[-6:]))}}} (with --pp / --dp for the "
                                       "other devices)")
            kv = m.num_kv_heads
            if kv and m.kind not in LATENT and kv % tp and tp % kv:
                raise LayoutError(f"--tp {tp} and layer {i}'s {kv} KV heads divide neither way",
                                  hint=f"use a --tp that divides {kv} or a multiple of it")
        f = layer.ffn
        if f.kind in ("moe", "latent_moe") and f.num_experts and layout.ep > 1 and f.num_experts % layout.ep:
            raise LayoutError(f"--ep {layout.ep} does not divide layer {i}'s {f.num_experts} experts",
                              hint="pick an --ep that divides the expert count")
    if layout.ep > 1 and (tp * layout.dp) % layout.ep:
        raise LayoutError(f"--ep {layout.ep} must divide TP x DP = {tp * layout.dp} (experts are spread over the "
                          "ranks of one stage)", hint=f"use --ep {tp * layout.dp} or a divisor of it")


def cache_share(kind: str, mixer, layout: Layout) -> float:
    """The share of one layer's per-sequence cache that one TP rank holds."""
    tp, dcp = layout.tp, layout.dcp
    if kind in LATENT:
        return 1.0 / dcp
    if kind in HEADED_STATES or kind in CHANNEL_STATES:
        return 1.0 / tp
    kv = getattr(mixer, "num_kv_heads", None) or 1
    return math.ceil(kv / tp) / kv / dcp      # KV heads split, replicated once TP exceeds them


def weight_share(component: str, layout: Layout, moe_group: int) -> float:
    """The share of a component's stored bytes one rank holds (within its pipeline stage)."""
    if component == "routed_experts":
        return 1.0 / moe_group
    if component in TP_SPLIT:
        return 1.0 / layout.tp
    return 1.0
