"""The checkpoint's tensors arranged for the detectors: model-level, per decoder layer, vision, MTP.

Names are split at the layer index (`...layers.17.self_attn.q_proj.weight` -> layer 17, suffix
`self_attn.q_proj.weight`). GGUF names (`blk.17.attn_q.weight`) are translated to the same
HF-style suffixes so one set of detectors serves both; the original name stays the evidence.
Quantized tensors carry their *logical* shape ([out, in] of the unpacked matrix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from archprobe.formats.quant import QuantRole
from archprobe.formats.safetensors import TensorInfo

LAYER_RE = re.compile(
    r"^(?P<prefix>(?:.*\.)?(?:layers|h|blocks|blk|layer|decoder_layers))\.(?P<idx>\d+)\.(?P<rest>.+)$")
VISION_PREFIXES = ("vision_tower", "visual", "vision_model", "vision_encoder", "mm_projector",
                   "multi_modal_projector", "vision", "image_encoder", "audio_tower", "model.visual",
                   "model.vision_tower", "model.multi_modal_projector", "v.", "mm.")
MTP_PREFIXES = ("mtp.", "model.mtp.", "mtp_layers.")

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


@dataclass
class Entry:
    """One (possibly folded) tensor: original name, normalised suffix, logical shape, quant role."""

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


@dataclass
class TensorTable:
    layers: dict[int, dict[str, Entry]] = field(default_factory=dict)
    model: dict[str, Entry] = field(default_factory=dict)
    vision: list[Entry] = field(default_factory=list)
    mtp: dict[int, dict[str, Entry]] = field(default_factory=dict)
    layer_prefix: str | None = None

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
    per_row = role.params // max(1, t.numel // t.shape[-1]) if t.numel else 0
    if role.scheme in ("gptq",):  # qweight [in/pack, out]
        return (t.shape[1], t.shape[0] * (role.params // max(1, t.numel)))
    if role.scheme in ("awq",):   # qweight [in, out/pack]
        return (t.shape[1] * (role.params // max(1, t.numel)), t.shape[0])
    return (*t.shape[:-1], per_row)


def build_table(tensors: list[TensorInfo], roles: dict[str, QuantRole], num_layers: int | None,
                gguf: bool = False) -> TensorTable:
    table = TensorTable()
    for t in tensors:
        role = roles[t.name]
        norm_name = _gguf_name(t.name) if gguf else t.name
        entry = Entry(t.name, norm_name, logical_shape(t, role), t.dtype, t.count, role, t)
        if norm_name.startswith(VISION_PREFIXES):
            table.vision.append(entry)
            continue
        m = LAYER_RE.match(norm_name)
        if m and not m.group("prefix").endswith(("encoder.blocks", "vision_model.encoder.layers")):
            idx, rest, prefix = int(m.group("idx")), m.group("rest"), m.group("prefix")
            entry.suffix = rest
            is_mtp = prefix.startswith(MTP_PREFIXES) or "mtp" in prefix.split(".")
            if not is_mtp and num_layers is not None and idx >= num_layers:
                is_mtp = True  # DeepSeek ships its MTP layer as layers.{num_hidden_layers}
            target = table.mtp if is_mtp else table.layers
            layer = target.setdefault(idx, {})
            prev = layer.get(rest)
            if prev is not None and prev.shape == entry.shape and prev.dtype == entry.dtype:
                prev.count += entry.count  # one expert family split across two shards
            else:
                layer[rest] = entry
            if not is_mtp and table.layer_prefix is None:
                table.layer_prefix = prefix
            continue
        if norm_name.startswith(MTP_PREFIXES):
            table.mtp.setdefault(-1, {})[norm_name] = entry
            continue
        table.model[norm_name] = entry
    table.layers = dict(sorted(table.layers.items()))
    return table
