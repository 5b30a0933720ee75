"""A layer's tensors grouped into modules: one weight (or packed storage), its bias, its companions.

`self_attn.q_proj.weight` + `.bias` are one module `self_attn.q_proj`; a compressed-tensors
`weight_packed` + `weight_scale`, a GPTQ `qweight` + `qzeros` + `scales` + `g_idx`, gpt-oss's
`gate_up_proj_blocks` + `_scales` (+ `_bias`) and bitsandbytes' `weight.absmax` ... are one module with
companions, whatever the scheme. A bare parameter (`A_log`, `sinks`, a stacked `experts.gate_up_proj`)
is a module of its own. The binders then reason about modules by their logical shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archprobe.structure.tensors import Entry

GROUPED_LEAVES = ("_blocks", "_scales", "_bias")      # gpt-oss style: `<w>_blocks`, `<w>_scales`, `<w>_bias`


@dataclass
class Module:
    path: str                                   # layer-relative (`mlp.experts.*.w1`, `self_attn.q_proj`)
    weight: Entry | None = None                  # the parameter itself (plain or packed storage)
    weight_leaf: str = "weight"                  # its leaf: weight, weight_packed, qweight, <w>_blocks, bare
    bias: Entry | None = None
    bias_leaf: str = "bias"
    companions: dict[str, Entry] = field(default_factory=dict)   # leaf -> quantization metadata

    @property
    def shape(self) -> tuple[int, ...]:
        return self.weight.shape if self.weight is not None else ()

    @property
    def count(self) -> int:
        return self.weight.count if self.weight is not None else 1

    @property
    def leaf(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def head(self) -> str:
        return self.path.split(".", 1)[0]

    def entries(self) -> list[tuple[str, Entry]]:
        """(suffix after the role, entry): '' for the weight, '.bias', '#<leaf>' for companions."""
        out = []
        if self.weight is not None:
            out.append(("" if self.weight_leaf in ("weight", "") else f"#{self.weight_leaf}", self.weight))
        if self.bias is not None:
            out.append((".bias", self.bias))
        out += [(f"#{leaf}", e) for leaf, e in sorted(self.companions.items())]
        return out

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other) -> bool:
        return self is other


def group_modules(layer: dict[str, Entry]) -> dict[str, Module]:
    """Module path -> Module for one layer's (folded) tensors."""
    mods: dict[str, Module] = {}
    names = set(layer)

    def mod(path: str) -> Module:
        m = mods.get(path)
        if m is None:
            m = mods[path] = Module(path)
        return m

    for rest, e in layer.items():
        base, _, leaf = rest.rpartition(".")
        if ".weight." in "." + rest + ".":          # bitsandbytes state: X.weight.absmax, X.weight.quant_state...
            head, _, tail = rest.partition(".weight.")
            if tail and head + ".weight" in names:
                mod(head).companions[tail] = e
                continue
        stem = next((leaf[: -len(s)] for s in GROUPED_LEAVES if leaf.endswith(s) and len(leaf) > len(s)), None)
        sibling = (f"{base}.{stem}" if base else stem) if stem else None
        if stem and (any(f"{sibling}{s}" in names for s in GROUPED_LEAVES if not leaf.endswith(s))
                     or sibling in names):
            m = mod(sibling)
            if leaf.endswith("_bias"):
                m.bias, m.bias_leaf = e, leaf
            elif e.role.metadata:
                m.companions[leaf[len(stem) + 1:]] = e
            else:
                m.weight, m.weight_leaf = e, leaf[len(stem) + 1:]
        elif leaf == "weight" and base:
            mod(base).weight = e
        elif leaf == "bias" and base:
            mod(base).bias = e
        elif e.role.metadata and base:
            mod(base).companions[leaf] = e
        elif leaf in ("weight_packed", "qweight") and base:
            m = mod(base)
            m.weight, m.weight_leaf = e, leaf
        else:
            m = mod(rest)                       # a bare parameter: A_log, sinks, stacked experts.gate_up_proj
            if m.weight is None:
                m.weight, m.weight_leaf = e, ""
            else:
                m.companions[leaf] = e
    for m in list(mods.values()):                # metadata without a weight (odd): keep it bound somewhere
        if m.weight is None and m.bias is not None and not m.companions:
            m.weight, m.bias = m.bias, None
            m.weight_leaf = m.bias_leaf if m.bias_leaf != "bias" else "bias"
    return mods
