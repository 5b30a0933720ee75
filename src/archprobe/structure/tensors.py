"""The checkpoint's tensors arranged for the card: model level, per decoder layer, vision, MTP.

The decoder-layer container is found by the numbers in the names, not by a word: of every
`<prefix>.<n>.<rest>` the prefix that enumerates the most distinct `n` among the language model's
tensors is the layer stack (`model.layers`, `transformer.h`, `backbone.blocks`, a renamed
`net.stack`, ...). A layer index past the config's count stays a decoder layer (with a warning) unless
its shapes say MTP (the [H, 2H] projection that joins the embedding and the hidden state). Vision
towers are set aside by their containers' names (the only thing that tells them apart from a second
text stack). GGUF names (`blk.17.attn_q.weight`) are translated to HF-style suffixes first.
Quantized tensors carry their *logical* shape ([out, in] of the unpacked matrix).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from archprobe.formats.quant import QuantRole
from archprobe.formats.safetensors import TensorInfo
from archprobe.structure.names import MTP_SUBSTRINGS, VISION_PREFIXES, VISION_SUBSTRINGS

GGUF_LAYER_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_qkv": "self_attn.qkv_proj", "attn_output": "self_attn.o_proj",
    "attn_q_a": "self_attn.q_a_proj", "attn_q_a_norm": "self_attn.q_a_layernorm",
    "attn_q_b": "self_attn.q_b_proj", "attn_kv_a_mqa": "self_attn.kv_a_proj_with_mqa",
    "attn_kv_a_norm": "self_attn.kv_a_layernorm", "attn_kv_b": "self_attn.kv_b_proj",
    "attn_k_b": "self_attn.k_b_proj", "attn_v_b": "self_attn.v_b_proj",
    "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    "ffn_gate_inp": "mlp.gate", "exp_probs_b": "mlp.gate.e_score_correction_bias",
    "ffn_gate_exps": "mlp.experts.gate_proj", "ffn_up_exps": "mlp.experts.up_proj",
    "ffn_down_exps": "mlp.experts.down_proj", "ffn_gate_shexp": "mlp.shared_experts.gate_proj",
    "ffn_up_shexp": "mlp.shared_experts.up_proj", "ffn_down_shexp": "mlp.shared_experts.down_proj",
    "ssm_a": "mixer.A_log", "ssm_d": "mixer.D", "ssm_dt": "mixer.dt_bias", "ssm_in": "mixer.in_proj",
    "ssm_out": "mixer.out_proj", "ssm_conv1d": "mixer.conv1d", "ssm_norm": "mixer.norm",
}
GGUF_MODEL_NAMES = {"token_embd": "model.embed_tokens", "output": "lm_head", "output_norm": "model.norm"}
_NUM = re.compile(r"(?:^|\.)(\d+)\.")


@dataclass
class Entry:
    """One (possibly folded) tensor: original name, layer-relative suffix, logical shape, quant role."""

    name: str
    suffix: str
    shape: tuple[int, ...]      # logical (unpacked) shape
    dtype: str
    count: int
    role: QuantRole
    info: TensorInfo

    @property
    def params(self) -> int:
        return self.role.params * self.count

    @property
    def stored_elements(self) -> int:
        return self.info.numel * self.count


@dataclass
class TensorTable:
    layers: dict[int, dict[str, Entry]] = field(default_factory=dict)
    model: dict[str, Entry] = field(default_factory=dict)
    vision: list[Entry] = field(default_factory=list)
    mtp: dict[int, dict[str, Entry]] = field(default_factory=dict)
    layer_prefix: str | None = None
    warnings: list[str] = field(default_factory=list)

    def all_entries(self):
        yield from self.model.values()
        for layer in self.layers.values():
            yield from layer.values()
        for layer in self.mtp.values():
            yield from layer.values()
        yield from self.vision


def _gguf_name(name: str) -> str:
    m = re.match(r"^blk\.(\d+)\.([a-z0-9_]+)\.(weight|bias)$", name)
    if m and m.group(2) in GGUF_LAYER_NAMES:
        return f"model.layers.{m.group(1)}.{GGUF_LAYER_NAMES[m.group(2)]}.{m.group(3)}"
    base, _, leaf = name.rpartition(".")
    if base in GGUF_MODEL_NAMES:
        return f"{GGUF_MODEL_NAMES[base]}.{leaf}"
    return name


def logical_shape(t: TensorInfo, role: QuantRole) -> tuple[int, ...]:
    """[out, in] of the matrix a packed tensor stands for (unchanged for plain tensors)."""
    if role.metadata or role.scheme is None or role.scheme.startswith("gguf") or len(t.shape) < 2:
        return t.shape
    if t.name.endswith("_blocks") and len(t.shape) >= 3:      # gpt-oss [..., out, G, 16] bytes
        return (*t.shape[:-2], t.shape[-2] * t.shape[-1] * 2)
    per_row = role.params // max(1, t.numel // t.shape[-1]) if t.numel else 0
    if role.scheme in ("gptq",):  # qweight [in/pack, out]
        return (t.shape[1], t.shape[0] * (role.params // max(1, t.numel)))
    if role.scheme in ("awq",):   # qweight [in, out/pack]
        return (t.shape[1] * (role.params // max(1, t.numel)), t.shape[0])
    return (*t.shape[:-1], per_row)


_VISION_MEMO: dict[str, bool] = {}


def _is_vision(name: str) -> bool:
    """Set aside by the container's name (the first three path components), memoised per container."""
    head = name.split(".", 3)[:3]
    key = ".".join(head)
    hit = _VISION_MEMO.get(key)
    if hit is None:
        low = key.lower()
        hit = low.startswith(VISION_PREFIXES) or any(w in part for part in low.split(".") for w in VISION_SUBSTRINGS)
        if len(_VISION_MEMO) > 100_000:
            _VISION_MEMO.clear()
        _VISION_MEMO[key] = hit
    return hit


def _layer_prefix(names: list[str]) -> str | None:
    """The prefix whose numeric segment enumerates the most layers (ties: the most tensors)."""
    indices: dict[str, set] = {}
    hits: Counter = Counter()
    mtp: dict[str, bool] = {}
    for n in names:
        m = _NUM.search(n)
        if m is None:
            continue
        prefix = n[: m.start(1)].rstrip(".")
        skip = mtp.get(prefix)
        if skip is None:
            skip = mtp[prefix] = any(w in part for part in prefix.lower().split(".") for w in MTP_SUBSTRINGS)
        if skip:
            continue
        indices.setdefault(prefix, set()).add(int(m.group(1)))
        hits[prefix] += 1
    if not indices:
        return None
    return max(indices, key=lambda p: (len(indices[p]), hits[p]))


def _is_mtp_layer(layer: dict[str, Entry], hidden: int | None, first: dict[str, Entry]) -> bool:
    """DeepSeek-style MTP: a [H, 2H] matrix that joins the embedding and the previous hidden state, one
    the regular layers do not have (an MLP's [H, 2H] down-projection is in every layer)."""
    return bool(hidden) and any(e.shape == (hidden, 2 * hidden) and rest not in first for rest, e in layer.items())


def build_table(tensors: list[TensorInfo], roles: dict[str, QuantRole], num_layers: int | None,
                gguf: bool = False, hidden: int | None = None) -> TensorTable:
    table = TensorTable()
    named = [(t, _gguf_name(t.name) if gguf else t.name) for t in tensors]
    text = [n for t, n in named if not _is_vision(n)]
    prefix = _layer_prefix(text)
    table.layer_prefix = prefix
    lead = prefix + "." if prefix else None
    for t, norm_name in named:
        role = roles[t.name]
        name = t.name
        entry = Entry(name, norm_name, logical_shape(t, role), t.dtype, t.count, role, t)
        if _is_vision(norm_name):
            table.vision.append(entry)
            continue
        if lead is not None and norm_name.startswith(lead):
            idx_s, _, rest = norm_name[len(lead):].partition(".")
            if idx_s.isdigit() and rest:
                entry.suffix = rest
                _add(table.layers.setdefault(int(idx_s), {}), rest, entry)
                continue
        low = norm_name.lower()
        if any(w in part for part in low.split(".") for w in MTP_SUBSTRINGS):
            m = _NUM.search(norm_name)
            idx = int(m.group(1)) if m else -1
            entry.suffix = norm_name[m.end():] if m else norm_name
            _add(table.mtp.setdefault(idx, {}), entry.suffix, entry)
            continue
        table.model[norm_name] = entry
    table.layers = dict(sorted(table.layers.items()))
    for layer in table.layers.values():
        _refold(layer)
    if num_layers is not None and table.layers:
        extra = [i for i in table.layers if i >= num_layers]
        first = next(iter(table.layers.values()))
        for i in extra:
            if _is_mtp_layer(table.layers[i], hidden, first):
                table.mtp[i] = table.layers.pop(i)
        if len(table.layers) != num_layers:
            table.warnings.append(f"config says {num_layers} layers, the checkpoint has tensors for "
                                  f"{len(table.layers)}: the card follows the tensors")
    return table


def _refold(layer: dict[str, Entry]) -> None:
    """An expert that a shard held alone was left unfolded there: merge it into its family."""
    for rest in [r for r in layer if "*" not in r and any(p.isdigit() for p in r.split(".")[:-1])]:
        parts = rest.split(".")
        k = max(i for i, p in enumerate(parts[:-1]) if p.isdigit())
        fam = layer.get(".".join(parts[:k] + ["*"] + parts[k + 1:]))
        e = layer[rest]
        if fam is not None and fam.shape == e.shape and fam.dtype == e.dtype:
            fam.count += e.count
            del layer[rest]


def _add(layer: dict[str, Entry], rest: str, entry: Entry) -> None:
    prev = layer.get(rest)
    if prev is None:
        layer[rest] = entry
    elif prev.shape == entry.shape and prev.dtype == entry.dtype:
        prev.count += entry.count          # one family split across two shards
    else:                                   # same folded name, other shape: keep both, told apart
        k = 2
        while f"{rest}#{k}" in layer:
            k += 1
        layer[f"{rest}#{k}"] = entry
