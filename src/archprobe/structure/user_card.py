"""A user's card (`--card card.yaml`) laid over the derived one, and checked against the shapes.

Every field whose value differs from the derivation becomes the user's (origin `user`); the tensor
bindings stay the checkpoint's (a card cannot invent tensors). The result must still fit the tensors:
a head count that does not divide a projection's width, a rank that is not a tensor's width, a layer
count or kind that the weights do not have, is a one-line CardError naming the field and the tensor.
"""

from __future__ import annotations

import dataclasses

from archprobe.structure.card import Card, CardError

SKIP = {"tensors", "unexplained", "set_aside", "quantization", "origins", "warnings", "evidence", "confidence",
        "schema"}


def _diff(base, user, path: str, out: list[tuple[str, object]]) -> None:
    if dataclasses.is_dataclass(base) and dataclasses.is_dataclass(user):
        for f in dataclasses.fields(base):
            if f.name in SKIP:
                continue
            _diff(getattr(base, f.name), getattr(user, f.name), f"{path}.{f.name}" if path else f.name, out)
    elif isinstance(base, list) and isinstance(user, list) and path == "layers":
        if len(user) != len(base):
            raise CardError(f"card field 'layers': the card has {len(user)} layers, the checkpoint's tensors "
                            f"have {len(base)}")
        for i, (b, u) in enumerate(zip(base, user, strict=False)):
            _diff(b, u, f"{path}.{i}", out)
    elif isinstance(base, dict) and isinstance(user, dict) and all(
            dataclasses.is_dataclass(v) for v in list(base.values()) + list(user.values())):
        for k in sorted(set(base) | set(user)):
            if k in base and k in user:
                _diff(base[k], user[k], f"{path}.{k}", out)
            elif k in user:
                out.append((f"{path}.{k}", user[k]))
    elif base != user:
        out.append((path, user))


def apply_user_card(derived: Card, user: Card, d) -> Card:
    """`derived` with the user's differing fields set (origin `user`), after checking them against shapes."""
    changes: list[tuple[str, object]] = []
    _diff(derived, user, "", changes)
    for path, value in changes:
        parts = path.split(".")
        if parts[0] == "layers" and len(parts) >= 3 and parts[2] in ("mixer", "ffn") and parts[-1] == "kind":
            raise CardError(f"card field {path!r} = {value!r}: the kind is read from the tensors "
                            f"({derived.get(path)!r}); fix the hyperparameters instead")
        _check_value(path, value)
        derived.set(path, value, "user")
        derived.origins.update({k: v for k, v in user.origins.items() if v == "user" and k not in derived.origins})
    check_against_shapes(derived, d)
    _check_changed_against_tensors(derived, d, {p for p, _ in changes})
    return derived


# integer fields where 0 means something (no rope part, no shared expert, a flag, a position)
ZERO_OK = {"rope_dim", "nope_dim", "a_log_stored", "index", "count"}


def _check_value(path: str, value) -> None:
    """What the config checks for a config value, for a value the user set: every count, width and
    length is a positive integer (a few may be 0), every number finite. A sub-object (a Rope, a
    Shared) is checked field by field."""
    import math

    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            _check_value(f"{path}.{f.name}", getattr(value, f.name))
        return
    leaf = path.rpartition(".")[2]
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        low = 0 if leaf in ZERO_OK else 1
        if value < low:
            raise CardError(f"card field {path!r} = {value}: must be {'non-negative' if low == 0 else 'positive'}")
    elif isinstance(value, float) and not math.isfinite(value):
        raise CardError(f"card field {path!r} = {value}: must be a finite number")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_value(f"{path}.{i}", v)
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_value(f"{path}.{k}", v)


def _check_changed_against_tensors(card: Card, d, changed: set[str]) -> None:
    """A value the user changed, checked against the tensor that shows it: the vocabulary against the
    embedding (and the head), the layer count against the layers the weights have, a dense FFN's width
    against its projections."""
    if "vocab_size" in changed and card.vocab_size:
        for role in ("embed", "lm_head"):
            t = _shape(d, card, role)
            if t and card.vocab_size not in t[0]:
                raise CardError(f"card field 'vocab_size' = {card.vocab_size} does not match tensor {t[1]!r} "
                                f"{list(t[0])}")
    if "num_layers" in changed and card.num_layers is not None and card.num_layers != len(card.layers):
        raise CardError(f"card field 'num_layers' = {card.num_layers}: the checkpoint's tensors have "
                        f"{len(card.layers)} layers")
    for i, layer in enumerate(card.layers):
        fp = f"layers.{i}.ffn"
        if f"{fp}.width" not in changed or not layer.ffn.width:
            continue
        for role, name in card.tensors.items():
            if role.startswith(fp + ".") and role.rsplit(".", 1)[1] in ("up", "gate", "down", "gate_up"):
                t = _shape(d, card, role)
                w = layer.ffn.width
                if t and w not in t[0] and 2 * w not in t[0]:
                    raise CardError(f"card field '{fp}.width' = {w} does not match tensor {name!r} {list(t[0])}")


def _shape(d, card: Card, role: str) -> tuple[tuple[int, ...], str] | None:
    name = card.tensors.get(role)
    if name is None:
        return None
    for e in d.table.all_entries():
        if e.name == name:
            return e.shape, name
    return None


def check_against_shapes(card: Card, d) -> None:
    """CardError naming the field and the tensor when a hyperparameter contradicts a tensor's shape."""
    H = card.hidden_size
    for i, layer in enumerate(card.layers):
        m, p = layer.mixer, f"layers.{i}.mixer"
        if m.kind in ("gqa", "mha", "mqa"):
            o = _shape(d, card, f"{p}.o")
            if o and m.num_heads:
                width = o[0][1] if not m.layout.get("transposed") else o[0][0]
                if width % m.num_heads:
                    raise CardError(f"card field '{p}.num_heads' = {m.num_heads} does not divide the attention "
                                    f"width {width} of tensor {o[1]!r}")
                if m.head_dim and m.head_dim * m.num_heads != width and m.output_gate != "fused_in_q_proj":
                    raise CardError(f"card field '{p}.head_dim' = {m.head_dim} x num_heads {m.num_heads} != "
                                    f"{width}, the width of tensor {o[1]!r}")
            k = _shape(d, card, f"{p}.k")
            if k and m.num_kv_heads and m.head_dim:
                kw = k[0][0] if not m.layout.get("transposed") else k[0][1]
                if m.num_kv_heads * m.head_dim != kw:
                    raise CardError(f"card field '{p}.num_kv_heads' = {m.num_kv_heads} x head_dim {m.head_dim} != "
                                    f"{kw}, the width of tensor {k[1]!r}")
            qkv = _shape(d, card, f"{p}.qkv")
            if qkv and m.num_heads and m.num_kv_heads and m.head_dim:
                w = qkv[0][0] if not m.layout.get("transposed") else qkv[0][1]
                if (m.num_heads + 2 * m.num_kv_heads) * m.head_dim != w:
                    rows = (m.num_heads + 2 * m.num_kv_heads) * m.head_dim
                    raise CardError(f"card fields '{p}.num_heads/num_kv_heads/head_dim' give {rows} rows, "
                                    f"tensor {qkv[1]!r} has {w}")
        if m.kind == "mla":
            kv_b = _shape(d, card, f"{p}.kv_b")
            if kv_b and m.kv_lora_rank and kv_b[0][1] != m.kv_lora_rank:
                raise CardError(f"card field '{p}.kv_lora_rank' = {m.kv_lora_rank} does not match tensor "
                                f"{kv_b[1]!r} (input width {kv_b[0][1]})")
            kv_a = _shape(d, card, f"{p}.kv_a")
            if kv_a and m.kv_lora_rank and m.rope_dim is not None and kv_a[0][0] != m.kv_lora_rank + m.rope_dim:
                raise CardError(f"card field '{p}.rope_dim' = {m.rope_dim}: kv_lora_rank + rope_dim != "
                                f"{kv_a[0][0]}, the width of tensor {kv_a[1]!r}")
            q_b = _shape(d, card, f"{p}.q_b")
            if q_b and m.q_lora_rank and q_b[0][1] != m.q_lora_rank:
                raise CardError(f"card field '{p}.q_lora_rank' = {m.q_lora_rank} does not match tensor "
                                f"{q_b[1]!r} (input width {q_b[0][1]})")
            if kv_b and m.num_heads and kv_b[0][0] % m.num_heads:
                raise CardError(f"card field '{p}.num_heads' = {m.num_heads} does not divide the {kv_b[0][0]} rows "
                                f"of tensor {kv_b[1]!r}")
        if m.kind in ("kda", "mamba2", "gated_deltanet") and m.num_heads:
            o_role = f"{p}.o" if m.kind == "kda" else f"{p}.out_proj"
            o = _shape(d, card, o_role)
            if o and o[0][1] % m.num_heads:
                raise CardError(f"card field '{p}.num_heads' = {m.num_heads} does not divide the width {o[0][1]} "
                                f"of tensor {o[1]!r}")
        f, fp = layer.ffn, f"layers.{i}.ffn"
        if f.kind in ("moe", "latent_moe"):
            router = _shape(d, card, f"{fp}.router")
            if router and f.num_experts and f.num_experts not in router[0]:
                raise CardError(f"card field '{fp}.num_experts' = {f.num_experts} does not match tensor "
                                f"{router[1]!r} {list(router[0])}")
            if f.top_k and f.num_experts and f.top_k > f.num_experts:
                raise CardError(f"card field '{fp}.top_k' = {f.top_k} is more than the {f.num_experts} experts "
                                f"of tensor {(router or (None, '?'))[1]!r}")
            if f.latent_size:
                down = _shape(d, card, f"{fp}.latent_down")
                if down and down[0][0] != f.latent_size:
                    raise CardError(f"card field '{fp}.latent_size' = {f.latent_size} does not match tensor "
                                    f"{down[1]!r} {list(down[0])}")
    if H:
        emb = _shape(d, card, "embed")
        if emb and emb[0][-1] != H:
            raise CardError(f"card field 'hidden_size' = {H} does not match tensor {emb[1]!r} {list(emb[0])}")
