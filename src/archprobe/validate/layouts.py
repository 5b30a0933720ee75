"""Stored tensors -> module tensors: the storage layouts the card records, applied at load time.

A checkpoint may store what one archprobe.nn parameter holds in another shape: fused (q | k | v, gate | up,
KDA's q | k | v conv), stacked (an expert bank [E, ...], flattened or transposed), interleaved (per kv group,
CodeGen's mp blocks, gate/up rows alternating), transposed (GPT-2's Conv1D), one tensor per head (a norm
bank), split apart (Gated DeltaNet's q/k/v) or scaled by a muP multiplier kept beside it. The card's
layout fields (`qkv_split`, `qkv_interleaved`, `gate_up`, `transposed`, `stacked_transposed`,
`mup_multipliers`, ...) say which. A stored tensor in such a layout is a `Source` (its `Layout` and what
it stores), kept apart from the module parameters in a `Part`; each module tensor made from sources is a
`Derived`. This module owns that knowledge: validate/roles.py names the sources, validate/stream.py and
validate/decode.py read them.

Per-expert tensors stored one by one (`experts.{e}.w1`) are module names, not sources: stacking them is
archprobe.nn's own loading step (nn/loading.sanitize), which loads transformers' state dicts too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from archprobe.validate.plan import Unsupported

# Gated DeltaNet roles stored apart (q/k/v and their convs) or all in one (`in_proj`): joined or split at load
GDN_SOURCES = ("q", "k", "v", "q_conv", "k_conv", "v_conv", "in_proj")


class Layout(Enum):
    """How a stored tensor differs from the module parameter(s) it feeds."""

    FUSED_QKV = "fused_qkv"      # q | k | v in one projection: split, de-interleaved (`qkv_split`, `qkv_interleaved`)
    GATE_UP = "gate_up"          # gate | up in one projection: halves, or rows alternating (`gate_up: interleaved`)
    STACKED = "stacked"          # an expert bank [E, ...]: flattened, transposed (`experts`, `stacked_transposed`)
    TRANSPOSED = "transposed"    # Conv1D storage [in, out] (`transposed`)
    FLATTENED = "flattened"      # a vector stored [1, E] (ERNIE's selection bias `moe_statics`)
    FOLDED = "folded"            # a weight a muP multiplier scales (`mup_multipliers`, Falcon-H1)
    GDN_PIECE = "gdn_piece"      # a Gated DeltaNet q / k / v (or its conv) stored apart, or its whole `in_proj`
    KDA_CONV = "kda_conv"        # KDA's q | k | v conv stored as one
    PER_HEAD = "per_head"        # one norm per head, stacked to [heads, head_dim]
    UNUSED = "unused"            # stored but never read (Lightning's block-decay tables, rebuilt from slope_rate)


@dataclass(frozen=True)
class Source:
    """A stored tensor no module parameter holds as it lies: its layout and, in module words, what it is
    (`self_attn.qkv.weight`, `block_sparse_moe.experts.gate_up.weight`; the parameter itself for the
    one-to-one layouts: transposed, flattened, folded, per head). `piece` tells apart several sources of one
    module tensor: a Gated DeltaNet role (q, k_conv, in_proj) or a head's index."""

    layout: Layout
    stored: str
    piece: str = ""

    @property
    def key(self) -> str:
        """A name unique within a part, ending in `stored` (quantization companions pair by that ending)."""
        return f"{self.layout.value}/{self.piece}/{self.stored}"


KDA_FUSED_CONV = Source(Layout.KDA_CONV, "self_attn.conv1d.weight")    # split at load into q_/k_/v_conv1d


@dataclass
class Derived:
    """A module tensor computed from stored tensors at load time (split, transposed, stacked)."""

    target: str
    sources: tuple[Source, ...]
    fn: Callable


@dataclass
class Part:
    """What one layer (or the model level, index None) loads: module parameter <- checkpoint name as stored,
    source <- checkpoint name for the tensors in a layout, and the derived tensors made from the sources."""

    names: dict[str, str] = field(default_factory=dict)
    sources: dict[Source, str] = field(default_factory=dict)
    derived: list[Derived] = field(default_factory=list)

    def checkpoint_names(self) -> list[str]:
        """Every checkpoint tensor the part reads (parameters as stored, then sources)."""
        return [*self.names.values(), *self.sources.values()]

    def to_source(self, target: str, layout: Layout) -> Source:
        """Move parameter `target` to a source of a one-to-one layout (transposed, flattened, folded)."""
        src = Source(layout, target)
        self.sources[src] = self.names.pop(target)
        return src


def per_head_bank(part: Part, target: str, name: str, attention) -> None:
    """One stored norm per head (`q_layernorm.norms.*.weight`, StableLM 2) stacked to [heads, head_dim]
    (`attention`: the layer's kinds/attention.py Args)."""
    import torch

    n = attention.num_heads if ".q_norm." in target else attention.num_kv_heads
    srcs = tuple(Source(Layout.PER_HEAD, target, str(h)) for h in range(n))
    for h, src in enumerate(srcs):
        part.sources[src] = name.replace("*", str(h), 1)
    part.derived.append(Derived(target, srcs, lambda *t: torch.stack(t)))


def apply_layouts(part: Part, layer, spec, shapes: dict[str, tuple]) -> None:
    """Derive module tensors from the part's sources as the layer's card layout says; Conv1D storage
    (`transposed`) and [1, E] selection biases become sources here, from the stored shapes.
    `spec`: the layer's archprobe.nn.decoder.LayerSpec (its mixers' arguments, its config)."""
    import torch

    cfg, mixer = spec.config, spec.mixer.args

    mlay, flay = layer.mixer.layout or {}, layer.ffn.layout or {}
    for target in list(part.names):
        owner_layout = mlay if target.startswith("self_attn.") else flay if not target.startswith(
            ("input_layernorm", "post_")) else {}
        if owner_layout.get("transposed") and target.endswith(".weight") and len(shapes.get(part.names[target],
                                                                                         ())) == 2:
            src = part.to_source(target, Layout.TRANSPOSED)
            part.derived.append(Derived(target, (src,), lambda t: t.t().contiguous()))
        elif target.endswith(".gate.e_score_correction_bias") and len(shapes.get(part.names[target], ())) == 2:
            src = part.to_source(target, Layout.FLATTENED)   # a selection bias stored [1, E] (ERNIE's moe_statics)
            part.derived.append(Derived(target, (src,), lambda t: t.reshape(-1).contiguous()))
    _gdn_sources(part, mixer)
    _fold_mup(part, layer, spec)
    if KDA_FUSED_CONV in part.sources:      # one conv over q | k | v, each D wide (transformers' Kimi Linear)
        for i, which in enumerate(("q", "k", "v")):
            part.derived.append(Derived(f"self_attn.{which}_conv1d.weight", (KDA_FUSED_CONV,),
                                        lambda t, i=i: t.chunk(3, dim=0)[i].contiguous()))
    for src in _dense_sources(part):
        bias = src.stored.endswith(".bias")
        if src.layout is Layout.FUSED_QKV:
            transposed = bool(mlay.get("transposed")) and not bias
            heads, kvh, d = mixer.num_heads, mixer.num_kv_heads, mixer.head_dim
            blocks = re.fullmatch(r"mp(\d+)_([qkv]{3})", str(mlay.get("qkv_interleaved")))
            interleaved = mlay.get("qkv_interleaved") not in (None, False, "blocks") and not blocks
            if mlay.get("qkv_interleaved") == "per_head" and heads != kvh:
                raise Unsupported(f"a per-head interleaved fused qkv with {heads} heads and {kvh} kv heads")
            split = mlay.get("qkv_split") or [heads * d, kvh * d, kvh * d]
            leaf = ".bias" if bias else ".weight"

            def qkv(t, which, transposed=transposed, interleaved=interleaved, split=split, heads=heads, kvh=kvh,
                    d=d, blocks=blocks):
                t = t.t() if transposed else t
                if blocks:   # CodeGen: mp blocks, each [three parts in `order`], the heads' rows mp-major
                    mp, order = int(blocks.group(1)), blocks.group(2)
                    g = t.reshape(mp, 3, t.shape[0] // (3 * mp), *t.shape[1:])
                    return g[:, order.index(which)].reshape(-1, *t.shape[1:]).contiguous()
                if interleaved:   # per kv group: [q heads of the group..., k, v], each d rows
                    g = t.reshape(kvh, heads // kvh + 2, d, *t.shape[1:])
                    pick = {"q": g[:, : heads // kvh], "k": g[:, heads // kvh], "v": g[:, heads // kvh + 1]}[which]
                    return pick.reshape(-1, *t.shape[1:]).contiguous()
                q, k, v = torch.split(t, list(split), dim=0)
                return {"q": q, "k": k, "v": v}[which].contiguous()

            for which in ("q", "k", "v"):
                part.derived.append(Derived(f"self_attn.{which}_proj{leaf}", (src,),
                                            lambda t, w=which, f=qkv: f(t, w)))
        elif src.layout is Layout.GATE_UP:
            owner = src.stored.rsplit(".gate_up", 1)[0]
            leaf = ".bias" if bias else ".weight"
            interleaved = flay.get("gate_up") == "interleaved"
            transposed = bool(flay.get("transposed")) and not bias

            def halves(t, first, interleaved=interleaved, transposed=transposed):
                t = t.t() if transposed else t
                if interleaved:
                    return (t[0::2] if first else t[1::2]).contiguous()
                a, b = t.chunk(2, dim=0)
                return (a if first else b).contiguous()

            part.derived.append(Derived(f"{owner}.gate_proj{leaf}", (src,), lambda t, f=halves: f(t, True)))
            part.derived.append(Derived(f"{owner}.up_proj{leaf}", (src,), lambda t, f=halves: f(t, False)))
        elif src.layout is Layout.STACKED:
            _stacked(part, src, flay, cfg.num_experts)


def _dense_sources(part: Part) -> list[Source]:
    """The part's sources as the tensors they dequantize to: a quantized fused tensor is stored as several
    companions (`qkv.weight_packed`, `qkv.weight_scale`, ...) and is split once, as its `qkv.weight`
    (a fused q | k | v or gate | up; stacked expert banks are left as stored)."""
    from archprobe.validate.quant import dequantized_name

    out: dict[Source, None] = {}
    for src in part.sources:
        fused = src.layout in (Layout.FUSED_QKV, Layout.GATE_UP)     # expert banks keep their own packed path
        out[Source(src.layout, dequantized_name(src.stored) if fused else src.stored, src.piece)] = None
    return list(out)


# Falcon-H1's muP multipliers (transformers' modeling_falcon_h1): each multiplies a projection's input or output,
# so it folds into that projection's weight (and, on an output, its bias): key -> (module, scales bias)
MUP_FOLDS = {"attention_in_multiplier": (("attn.q_proj", False), ("attn.k_proj", False), ("attn.v_proj", False)),
             "key_multiplier": (("attn.k_proj", True),), "attention_out_multiplier": (("attn.o_proj", True),),
             "ssm_in_multiplier": (("ssm.in_proj", False),), "ssm_out_multiplier": (("ssm.out_proj", True),),
             "ssm_multipliers": (("ssm.in_proj", True),),       # per row block z | x | B | C | dt
             "mlp_multipliers": (("mlp.gate_proj", True), ("mlp.down_proj", True))}


def _fold_mup(part: Part, layer, spec) -> None:
    """Fold the layer's muP multipliers into the weights they scale (exact: each is linear in its tensor)."""
    import torch

    ssm_args = next((s.args for s in (spec.mixer, spec.parallel_mixer) if s.kind == "mamba2"), None)

    ssm = next((mx for mx in (layer.mixer, layer.parallel_mixer) if mx is not None and mx.kind == "mamba2"), None)
    mup = ((ssm.layout or {}).get("mup_multipliers") or {}) if ssm is not None else {}
    if not mup:
        return
    owner = {"ssm": "self_attn" if layer.mixer.kind == "mamba2" else "parallel_mixer",
             "attn": "parallel_mixer" if layer.mixer.kind == "mamba2" else "self_attn", "mlp": "mlp"}
    factors: dict[str, list] = {}
    for key, value in mup.items():
        for i, (module, on_bias) in enumerate(MUP_FOLDS[key]):
            where, name = module.split(".")
            f = value[i] if key == "mlp_multipliers" else value
            if key == "ssm_multipliers":
                a = ssm_args
                inner, gn = a.num_heads * a.head_dim, a.n_groups * a.state_size
                f = torch.cat([torch.full((n,), float(v)) for n, v in
                               zip((inner, inner, gn, gn, a.num_heads), value, strict=True)])
            for leaf in ("weight", "bias") if on_bias else ("weight",):
                factors.setdefault(f"{owner[where]}.{name}.{leaf}", []).append(f)
    for target, fs in factors.items():
        if target not in part.names:
            if any(d.target == target for d in part.derived):
                raise Unsupported(f"{target}: a muP multiplier on a tensor computed at load")
            continue
        src = part.to_source(target, Layout.FOLDED)

        def scaled(t, fs=fs):
            out = t.float()
            for f in fs:
                f = f.to(out.dtype) if torch.is_tensor(f) else f
                out = out * (f.reshape(-1, *([1] * (out.dim() - 1))) if torch.is_tensor(f) else f)
            return out.to(t.dtype).contiguous()
        part.derived.append(Derived(target, (src,), scaled))


def _gdn_sources(part: Part, gdn) -> None:
    """Gated DeltaNet's split layout from separate q/k/v projections and convs (concatenated in that order:
    the conv runs over q | k | v) or from one block-ordered `in_proj` (rows q | k | v | z | b | a)."""
    import torch

    src = {s.piece: s for s in part.sources if s.layout is Layout.GDN_PIECE and s.stored.endswith(".weight")}
    if not src:
        return
    for target, parts in (("in_proj_qkv", ("q", "k", "v")), ("conv1d", ("q_conv", "k_conv", "v_conv"))):
        if any(p in src for p in parts):
            if not all(p in src for p in parts):
                raise Unsupported(f"Gated DeltaNet: {', '.join(p for p in parts if p not in src)} missing beside "
                                  f"{', '.join(p for p in parts if p in src)}")
            part.derived.append(Derived(f"self_attn.{target}.weight", tuple(src[p] for p in parts),
                                        lambda *t: torch.cat(t, dim=0).contiguous()))
    if "in_proj" in src:
        nk, nv, dk, dv = gdn.num_key_heads, gdn.num_value_heads, gdn.key_head_dim, gdn.value_head_dim
        sizes = [2 * nk * dk + nv * dv, nv * dv, nv, nv]
        for i, name in enumerate(("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")):
            part.derived.append(Derived(f"self_attn.{name}.weight", (src["in_proj"],),
                                        lambda t, i=i: torch.split(t, sizes, dim=0)[i].contiguous()))


def _stacked(part: Part, src: Source, flay: dict, num_experts: int = 1) -> None:
    """A stacked expert bank [E, out, in] (or [E, in, out] when `stacked_transposed`; or flattened
    [E * F, H], DBRX, the down bank stored [F, H] per expert when `down_transposed`) -> ExpertBank tensors."""
    import torch

    ffn, _, what = src.stored.partition(".experts.")      # `block_sparse_moe`, `gate_up.weight`
    owner = ffn + ".experts"
    which, _, leaf = what.partition(".")
    bias = leaf == "bias"
    flat = flay.get("experts") == "flattened" and not bias
    transposed = (bool(flay.get("stacked_transposed")) or (flat and which == "down" and
                                                            bool(flay.get("down_transposed")))) and not bias
    interleaved = flay.get("gate_up") == "interleaved"

    def fix(t):   # weights [E, out, in] after the transpose; biases [E, out]
        t = t.reshape(num_experts, -1, t.shape[-1]) if flat else t
        t = t.transpose(-1, -2) if transposed else t
        if which == "gate_up" and interleaved:   # even rows gate, odd rows up -> gate rows first
            rows = t.dim() - (1 if bias else 2)
            n = t.shape[rows]
            t = t.index_select(rows, torch.cat([torch.arange(0, n, 2), torch.arange(1, n, 2)]))
        return t.contiguous()

    if which in ("gate_up", "down"):
        target = f"{owner}.{which}_proj" + ("_bias" if bias else "")
        part.derived.append(Derived(target, (src,), fix))
    elif which == "gate":
        up = Source(Layout.STACKED, f"{owner}.up.{leaf}")
        if up not in part.sources:
            raise Unsupported(f"{owner}: a stacked gate bank without its up bank")
        part.derived.append(Derived(f"{owner}.gate_up_proj" + ("_bias" if bias else ""), (src, up),
                                    lambda g, u: torch.cat([fix(g), fix(u)], dim=-1 if bias else -2)))
    elif which == "up" and Source(Layout.STACKED, f"{owner}.gate.{leaf}") not in part.sources:
        part.derived.append(Derived(f"{owner}.up_proj" + ("_bias" if bias else ""), (src,), fix))
