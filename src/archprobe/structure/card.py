"""The architecture card (`archprobe.card/1`): the model as data, read by every command.

Why: family knowledge written in several places drifts; one object derived once from config.json and
the shard headers (shapes first, names only to break ties) is what inspect, memory, adapt, report and
validate all read, and what a user corrects once (`archprobe card SOURCE -o card.yaml`, then `--card`).

Stdlib dataclasses only (no torch); YAML via pyyaml `safe_dump`/`safe_load`, JSON via `json`.

Parts and fields (None = not known; see "origins" below)
--------------------------------------------------------
Card (model level)
  schema ("archprobe.card/1"), model_type (tie-breaker only), architectures, hidden_size, vocab_size,
  num_layers, max_position_embeddings, tie_word_embeddings
  embed: Embedding       scale (multiplier on the embedding output, e.g. gemma sqrt(H)), pos_kind
                         (`rope` / `learned` / `sinusoidal` / `alibi` / `none`), sinusoid (its formula),
                         position_offset
  rope: Rope             theta, type (`default`/`yarn`/`llama3`/`longrope`/`linear`/`dynamic`), factor,
                         original_max_position, partial_rotary_factor, interleaved (pairs (0,1),(2,3)...
                         vs halves), scaling (the raw rope_scaling dict)
  final_norm: Norm       see Norm below
  head: Head             soft_cap (final logit soft-cap), tied (head shares the embedding)
  layers: list[Layer]
  tensors: dict[role, checkpoint name]   every tensor of the language model bound to exactly one role
  unexplained: list[name]                tensors no role explains
  set_aside: {"vision": [names], "mtp": [names]}
  quantization: list[{"scheme", "tensors", "bits", "group_size"}]
  origins: dict[field path, origin]      see below
  warnings: list[str]

Layer
  index, parallel (attention and FFN read the same normalised input: GPT-J / Falcon / Cohere blocks),
  parallel_mixer (a second Mixer beside the first, both reading the same input: Falcon-H1's attention
  next to its Mamba-2; roles `layers.{i}.parallel_mixer.*`; None for almost every model)
  mixer: Mixer  kind: `gqa` `mha` `mqa` `mla` `lowrank_kv` `kda` `gated_deltanet` `mamba2` `mamba` (v1)
                `short_conv` `lightning` (linear attention, fixed per-head decay) `rg_lru` (Griffin) `moa`
                (mixture of attention experts, JetMoE: num_experts, top_k, kv heads of head_dim) `none`
                `unknown`
                softmax attention: num_heads, num_kv_heads, head_dim, v_head_dim, bias {q,k,v,o: bool},
                fused_qkv, qk_norm (`per_head` / `full` / `weightless` / None), sliding_window,
                chunk_size (chunked attention), sinks, logit_soft_cap,
                output_gate (`sigmoid_g_proj` / `fused_in_q_proj` / `full_rank` / `low_rank` / None),
                rope (False: NoPE layer), layer_rope (a Rope overriding the model's for this layer:
                per-layer-type rope_parameters, layer_rope_theta), qk_norm_after_rope, alibi
                MLA: kv_lora_rank, q_lora_rank, rope_dim, nope_dim (+ v_head_dim), cache_width_per_token
                indexer {index_topk, index_heads, index_dim} or None (DeepSeek sparse attention)
                KDA / GDN / Mamba-2: num_heads, head_dim, value_head_dim, conv_kernel, conv_dim, state_size,
                n_groups, gate_lower_bound, a_log_stored; Mamba-1: dt_rank, ssm_norm_eps (RMS norms on dt, B,
                C); GDN: beta_scale (2: allow_neg_eigval), norm_eps (its output norm's, when not the layers')
  ffn: Ffn      kind: `dense` `moe` `latent_moe` `none` `unknown`; activation (`silu`, `gelu`, `relu2`,
                `situ`, ...), gated (GLU), bias, width (dense intermediate), num_experts, top_k, expert_width,
                router: Router {scoring `softmax`/`sigmoid`/`sparsemixer`, selection_bias, renormalize,
                scaling, n_group, topk_group, input `hidden`/`latent`, weight_on `output`/`input`,
                sparsemixer_eps, group_score `top2_sum`/`max`, bias_on `scores`/`logits`},
                shared: Shared {count, width, gated, combine `sum`/`average`},
                latent_size, latent_norm, glu_limit and glu_alpha (activation `swiglu_oss`)
  norm: dict[placement, Norm]    placements `pre_mixer`, `post_mixer`, `pre_ffn`, `post_ffn`, `latent`;
                                 post-LN (x = norm(x + f(x)), GPT-1, OPT-350m): `post_mixer_sum`, `post_ffn_sum`
  residual: Residual  kind `identity` / `gated` / `depth_weights` / `attnres`, block_size
Every part (Mixer, Ffn) also has `layout` (facts the math needs about storage, see below),
`evidence` (list of {"tensor", "shape", "why"}) and `confidence` (0..1).

Norm: kind (`rms` / `layer`), eps, offset (True: weight stored as w, applied as 1 + w), bias (bool).

Tensor roles (the convention validate relies on)
------------------------------------------------
A role is a dotted path into the card; a `.weight` suffix is implied, `.bias` is written.
  model level: `embed`, `pos_embed`, `final_norm`, `final_norm.bias`, `head` (absent when tied)
  per layer:   `layers.{i}.{part}.{param}`, part in `mixer`, `ffn`, `norm.<placement>`, `residual`
  mixer params: `q k v o qkv q.bias k.bias v.bias o.bias qkv.bias q_norm k_norm sinks q_a q_a_norm q_b
               kv_a kv_a_norm kv_b g` (output gate); linear mixers: `in_proj out_proj conv1d conv1d.bias
               A_log D dt_bias norm` (Mamba-2), `q k v o q_conv k_conv v_conv f_a f_b g_a g_b b A_log dt_bias
               o_norm` (KDA), `in_proj_qkvz in_proj_ba conv1d A_log dt_bias norm out_proj` (GDN);
               indexer params as `indexer.<checkpoint leaf>`
  ffn params:  `gate up down gate_up` (+ `.bias`); MoE: `router`, `router.bias` (selection bias),
               `experts.*.gate|up|down` (an enumerated bank: the checkpoint name carries `*` at the
               expert index, see `expand`), `experts.gate_up|down|gate|up` (a stacked [E, ...] tensor,
               + `.bias`), `shared.gate|up|down|gate_up`, `shared_gate`, LatentMoE `latent_down`,
               `latent_up`, `latent_norm`
  residual params: `residual.<checkpoint leaf>`
  quantized companions: `<role>#<leaf>` where leaf is what the checkpoint calls the companion with the
               base name removed: `#scales`, `#blocks` (gpt-oss `*_blocks`), `#qweight`, `#qzeros`,
               `#g_idx`, `#weight_packed`, `#weight_scale`, `#weight_scale_inv`, `#absmax`, ...
               (the quantized storage itself is a companion too when its leaf is not `weight`).
  Unknown params keep their checkpoint leaf: `layers.3.mixer.<leaf>` (still bound, never dropped).

Layouts (`part.layout`, a dict)
  `qkv_split`: [q, k, v] row counts of a fused qkv (in that order); `qkv_interleaved`: per-head
  [q..., k, v] groups (GPT-NeoX / Falcon) instead of three blocks, or `mp<N>_<order>` (CodeGen's
  `mp4_qvk`: N blocks, each its share of q, v, k in that order); `gate_up`: `halves` (gate then up)
  or `interleaved` (gpt-oss: even rows gate, odd rows up); `transposed`: True for Conv1D [in, out]
  storage (GPT-2); `experts`: `enumerated` or `stacked`; `stacked_transposed`: True when a stacked
  bank stores [E, in, out] instead of [E, out, in].

Field origins
-------------
`origins[path]` is `shape` (read off tensor shapes), `config:<key>`, `default` (family_defaults table or
a documented default), or `user` (set by `Card.set` or a user card). A required field whose value is
None is `unknown` and listed by `unknown_fields()`; memory refuses a card with unknown fields it needs.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import dataclass, field
from typing import Any

from archprobe.errors import ArchprobeError
from archprobe.formats.limits import MAX_CARD_INT
from archprobe.kinds import MIXERS

SCHEMA = "archprobe.card/1"
ORIGINS = ("shape", "default", "user")   # plus "config:<key>"; "unknown" when the value is None


class CardError(ArchprobeError):
    """A card is malformed, or contradicts the checkpoint (the message names the field and tensor)."""


@dataclass
class Norm:
    kind: str | None = None          # rms, layer
    eps: float | None = None
    offset: bool | None = None       # True: applied as (1 + w) (gemma, qwen3-next)
    bias: bool | None = None


@dataclass
class Embedding:
    scale: float | None = None       # output multiplier (gemma: sqrt(hidden))
    pos_kind: str | None = None      # rope, learned, alibi, none
    position_offset: int | None = None   # learned positions: row of position t is t + offset (OPT: 2)
    norm: str | None = None          # a parameter-free norm right after the embedding (nanochat: rms)
    sinusoid: str | None = None      # pos_kind sinusoidal: `vaswani` (1/10000^(2i/d), CTRL) or `tensor2tensor`
                                     # (exp(-i ln 10000 / (d/2 - 1)), fairseq / XGLM); [sin | cos] halves


@dataclass
class Rope:
    theta: float | None = None
    type: str | None = None          # default, yarn, llama3, longrope, linear, dynamic
    factor: float | None = None
    original_max_position: int | None = None
    partial_rotary_factor: float | None = None
    interleaved: bool | None = None  # True: rotate pairs (0,1),(2,3); False: halves
    inverse: bool | None = None      # True: rotate by the negative angle (NanoChat)
    scaling: dict | None = None


@dataclass
class Head:
    soft_cap: float | None = None
    tied: bool | None = None
    scale: float | None = None       # logits multiplier (cohere logit_scale; granite 1 / logits_scaling)


@dataclass
class Router:
    scoring: str | None = None       # softmax, sigmoid
    selection_bias: bool | None = None
    renormalize: bool | None = None
    scaling: float | None = None
    n_group: int | None = None
    topk_group: int | None = None
    input: str | None = None         # hidden, latent
    weight_on: str | None = None     # output (default: weight * expert(x)), input (Llama 4: expert(weight * x))
    sparsemixer_eps: float | None = None   # scoring `sparsemixer` (PhiMoE): the logit band 2 * eps per pick
    group_score: str | None = None   # group-limited routing ranks groups by `top2_sum` (V3) or `max` (V2)
    bias_on: str | None = None       # where the selection bias is added: `scores` (default) or `logits` (Kolibri)


@dataclass
class Shared:
    count: int | None = None
    width: int | None = None
    gated: bool | None = None
    combine: str | None = None       # sum (default), average: (routed + shared) / 2 (Cohere2-MoE)


@dataclass
class Mixer:
    kind: str = "unknown"
    num_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    v_head_dim: int | None = None
    bias: dict = field(default_factory=dict)    # {"q": bool, "k": ..., "v": ..., "o": ...}
    fused_qkv: bool | None = None
    qk_norm: str | None = None
    sliding_window: int | None = None
    sinks: bool | None = None
    logit_soft_cap: float | None = None
    output_gate: str | None = None
    rope: bool | None = None
    layer_rope: Rope | None = None   # this layer's own rope where it differs from the model's (None: model's)
    alibi: bool | None = None
    scale: float | None = None       # softmax scale when not 1/sqrt(head_dim) (query_pre_attn_scalar, ...)
    qk_norm_after_rope: bool | None = None   # q/k norms applied to the rotated q, k (HunYuan)
    query_scale: dict | None = None  # position-dependent query multiplier (nn.attention.query_scale_at): ssmax
                                     # {length, power} (Beam), log_floor {beta, length, shift} (Llama 4)
    clip_qkv: float | None = None    # q, k, v clamped to [-clip, clip] (OLMo, DBRX clip_qkv)
    alibi_scaled: bool | None = None   # ALiBi added before the softmax scale, so scaled with it (Falcon)
    chunk_size: int | None = None    # chunked attention: a query sees only its own block of keys (Llama 4)
    num_experts: int | None = None   # kind `moa` (JetMoE): attention experts, each token's top_k of them
    top_k: int | None = None
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    rope_dim: int | None = None
    nope_dim: int | None = None
    cache_width_per_token: int | None = None
    indexer: dict | None = None
    value_head_dim: int | None = None
    conv_kernel: int | None = None
    conv_dim: int | None = None
    state_size: int | None = None
    n_groups: int | None = None
    gate_lower_bound: float | None = None
    a_log_stored: int | None = None
    dt_rank: int | None = None        # Mamba-1: the rank of the time-step projection (x_proj rows - 2 state)
    ssm_norm_eps: float | None = None  # Mamba-1: eps of the RMS norms on dt, B, C (Jamba, FalconMamba); None: none
    beta_scale: float | None = None    # Gated DeltaNet: write strength sigmoid(b) * scale (2: allow_neg_eigval)
    norm_eps: float | None = None      # eps of the mixer's own output norm when not the layer norms' eps
    layout: dict = field(default_factory=dict)
    evidence: list = field(default_factory=list)
    confidence: float | None = None


@dataclass
class Ffn:
    kind: str = "unknown"
    activation: str | None = None
    gated: bool | None = None
    bias: bool | None = None
    width: int | None = None
    num_experts: int | None = None
    top_k: int | None = None
    expert_width: int | None = None
    router: Router = field(default_factory=Router)
    shared: Shared | None = None
    latent_size: int | None = None
    latent_norm: bool | None = None
    glu_limit: float | None = None   # activation `swiglu_oss` (gpt-oss): the clamp on gate and up
    glu_alpha: float | None = None   # and its sigmoid's slope (1.702)
    layout: dict = field(default_factory=dict)
    evidence: list = field(default_factory=list)
    confidence: float | None = None


@dataclass
class Residual:
    kind: str = "identity"           # identity, gated, depth_weights, attnres
    block_size: int | None = None
    multiplier: float | None = None  # x + m * branch(x) (granite residual_multiplier); None: 1
    scales: dict | None = None       # from_norm (MiniMax-01): {mixer: [alpha, beta], ffn: [alpha, beta]}; None: 1s


@dataclass
class Layer:
    index: int = 0
    mixer: Mixer = field(default_factory=Mixer)
    ffn: Ffn = field(default_factory=Ffn)
    norm: dict[str, Norm] = field(default_factory=dict)
    residual: Residual = field(default_factory=Residual)
    parallel: bool | None = None
    parallel_mixer: Mixer | None = None      # a second mixer beside the first on the same input (Falcon-H1)


# The fields the math needs, per part kind: None there is `unknown` (memory/validate refuse it).
REQUIRED_MIXER = {name: k.required for name, k in MIXERS.items()}   # each kind's own list (archprobe.kinds)
REQUIRED_FFN = {"moe": ("num_experts", "top_k"), "latent_moe": ("num_experts", "top_k", "latent_size")}


@dataclass
class Card:
    schema: str = SCHEMA
    model_type: str | None = None
    architectures: list = field(default_factory=list)
    hidden_size: int | None = None
    vocab_size: int | None = None
    num_layers: int | None = None
    max_position_embeddings: int | None = None
    tie_word_embeddings: bool | None = None
    embed: Embedding = field(default_factory=Embedding)
    rope: Rope = field(default_factory=Rope)
    final_norm: Norm = field(default_factory=Norm)
    head: Head = field(default_factory=Head)
    layers: list[Layer] = field(default_factory=list)
    tensors: dict[str, str] = field(default_factory=dict)
    unexplained: list = field(default_factory=list)
    set_aside: dict = field(default_factory=lambda: {"vision": [], "mtp": []})
    quantization: list = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    warnings: list = field(default_factory=list)

    # --- the layer plan, printable as data ---------------------------------------------------------
    @property
    def mixer_plan(self) -> tuple[str, ...]:
        return tuple(layer.mixer.kind for layer in self.layers)

    @property
    def ffn_plan(self) -> tuple[str, ...]:
        return tuple(layer.ffn.kind for layer in self.layers)

    def layer_plan(self) -> list[tuple[int, str, str]]:
        """[(index, mixer kind, ffn kind)]: what every command must agree on."""
        return [(layer.index, layer.mixer.kind, layer.ffn.kind) for layer in self.layers]

    # --- dotted paths ------------------------------------------------------------------------------
    def get(self, path: str) -> Any:
        """The value at a dotted path (`layers.3.ffn.router.scoring`); CardError when absent."""
        obj: Any = self
        for part in path.split("."):
            obj = _step(obj, part, path)
        return obj

    def set(self, path: str, value: Any, origin: str = "user") -> None:
        """Set a field by dotted path and record its origin (`user` unless told)."""
        head, _, leaf = path.rpartition(".")
        parent = self.get(head) if head else self
        if isinstance(parent, dict):
            parent[leaf] = value
        elif isinstance(parent, list):
            raise CardError(f"card field {path!r}: cannot replace a whole list element")
        elif dataclasses.is_dataclass(parent) and leaf in _names(type(parent)):
            setattr(parent, leaf, _coerce(parent, leaf, value, path))
        else:
            raise CardError(f"card field {path!r} does not exist")
        self.origins[path] = origin

    def origin(self, path: str) -> str:
        """`shape`, `config:<key>`, `default`, `user`, or `unknown` (value None, nobody said)."""
        if path in self.origins:
            return self.origins[path]
        try:
            value = self.get(path)
        except CardError:
            return "unknown"
        return "unknown" if value is None else "default"

    def unknown_fields(self) -> list[str]:
        """Dotted paths of the fields the math needs that nobody could settle."""
        out = []
        if not self.hidden_size:
            out.append("hidden_size")
        for i, layer in enumerate(self.layers):
            for name in REQUIRED_MIXER.get(layer.mixer.kind, ()):
                if getattr(layer.mixer, name) is None:
                    out.append(f"layers.{i}.mixer.{name}")
            if layer.parallel_mixer is not None:
                for name in REQUIRED_MIXER.get(layer.parallel_mixer.kind, ()):
                    if getattr(layer.parallel_mixer, name) is None:
                        out.append(f"layers.{i}.parallel_mixer.{name}")
            if layer.mixer.kind == "unknown":
                out.append(f"layers.{i}.mixer.kind")
            for name in REQUIRED_FFN.get(layer.ffn.kind, ()):
                if getattr(layer.ffn, name) is None:
                    out.append(f"layers.{i}.ffn.{name}")
            if layer.ffn.kind in ("moe", "latent_moe") and layer.ffn.router.scoring is None:
                out.append(f"layers.{i}.ffn.router.scoring")
            if layer.ffn.kind == "unknown":
                out.append(f"layers.{i}.ffn.kind")
        return out

    # --- roles ---------------------------------------------------------------------------------------
    def expand(self, num_experts: dict[int, int] | None = None):
        """(role, checkpoint name) for every stored tensor: `*` in an enumerated expert bank becomes
        0..E-1 in both (E from the layer's ffn.num_experts unless given)."""
        for role, name in self.tensors.items():
            if "*" not in role:
                yield role, name
                continue
            i = int(role.split(".")[1]) if role.startswith("layers.") else None
            n = (num_experts or {}).get(i) if i is not None else None
            if n is None and i is not None and i < len(self.layers):
                n = self.layers[i].ffn.num_experts
            for e in range(n or 0):
                yield role.replace("*", str(e), 1), name.replace("*", str(e), 1)

    def role_of(self) -> dict[str, str]:
        """checkpoint name -> role (the inverse of `tensors`, folded names as stored)."""
        return {name: role for role, name in self.tensors.items()}

    # --- serialisation ------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return _to_plain(self)

    @classmethod
    def from_dict(cls, data: dict) -> Card:
        if not isinstance(data, dict):
            raise CardError(f"a card is a mapping, got {type(data).__name__}")
        if data.get("schema", SCHEMA) != SCHEMA:
            raise CardError(f"card schema {data.get('schema')!r}, expected {SCHEMA}")
        return _from_plain(cls, data, "")

    def to_json(self) -> str:
        from archprobe.formats.jsontext import dumps

        return dumps(self.to_dict(), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Card:
        try:
            return cls.from_dict(json.loads(text))
        except ValueError as exc:
            raise CardError(f"card is not valid JSON ({str(exc).splitlines()[0][:100]})") from None

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=110)

    @classmethod
    def from_yaml(cls, text: str) -> Card:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise CardError(f"card is not valid YAML ({str(exc).splitlines()[0][:100]})") from None
        return cls.from_dict(data)


def load_card(path: str) -> Card:
    """A card from a .yaml/.yml/.json file (one-line CardError when unreadable or malformed), read through
    formats/structured.py: a regular file (a FIFO is refused, not waited on), capped before it is read,
    JSON strict with its depth and memory-cost caps, YAML with duplicate keys, long integers, non-JSON
    types and alias bombs refused."""
    from archprobe.formats import structured

    # YAML: PyYAML builds ~175x its bytes of nodes (585 KB: 102 MB with libyaml, 194 MB and 28 s without);
    # a card is ~40 KB, so 256 KB is room enough and costs at most ~45 MB
    if path.endswith(".json"):
        data = structured.load_json(path, "the card", CardError, limit=64 * 1024 * 1024)
    else:
        data = structured.load_yaml(path, "the card", CardError)
    try:
        return Card.from_dict(data)
    except CardError as exc:
        raise CardError(f"{path}: {exc.message}") from None


# --- helpers ---------------------------------------------------------------------------------------
def _step(obj: Any, part: str, path: str) -> Any:
    if isinstance(obj, list):
        if part.lstrip("-").isdigit() and -len(obj) <= int(part) < len(obj):
            return obj[int(part)]
    elif isinstance(obj, dict):
        if part in obj:
            return obj[part]
    elif dataclasses.is_dataclass(obj) and part in _names(type(obj)):
        return getattr(obj, part)
    raise CardError(f"card field {path!r} does not exist (at {part!r})")


_HINTS: dict[type, dict] = {}
_NAMES: dict[type, frozenset] = {}


def _names(cls: type) -> frozenset:
    if cls not in _NAMES:
        _NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return _NAMES[cls]


def _hints(cls: type) -> dict:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _coerce(parent: Any, leaf: str, value: Any, path: str) -> Any:
    hint = _hints(type(parent)).get(leaf)
    return _convert(hint, value, path)


_PLAIN = (str, int, float, bool, type(None))


def _to_plain(obj: Any) -> Any:
    if isinstance(obj, _PLAIN):
        return obj
    if isinstance(obj, dict):
        return {str(k): v if isinstance(v, _PLAIN) else _to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [v if isinstance(v, _PLAIN) else _to_plain(v) for v in obj]
    if dataclasses.is_dataclass(obj):      # the card's classes hold nothing but their fields, in order
        return {k: v if isinstance(v, _PLAIN) else _to_plain(v) for k, v in vars(obj).items()}
    return obj


def _from_plain(cls: type, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise CardError(f"card field {path or 'card'!r}: expected a mapping, got {type(data).__name__}")
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    extra = sorted(set(data) - names)
    if extra:
        raise CardError(f"card field {(path + '.' if path else '') + str(extra[0])!r} does not exist")
    kwargs = {k: _convert(hints[k], v, f"{path}.{k}" if path else k) for k, v in data.items()}
    return cls(**kwargs)




def _convert(hint: Any, value: Any, path: str) -> Any:
    """A plain (YAML/JSON) value converted to the annotated type, with a one-line error naming `path`."""
    if hint is None or hint is Any:
        return value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", typing.Union)):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, path) if len(inner) == 1 else value
    if dataclasses.is_dataclass(hint):
        if isinstance(value, hint):   # a whole sub-object the derived card left empty (layer_rope, shared)
            return value
        return _from_plain(hint, value, path)
    if origin is list:
        if not isinstance(value, list):
            raise CardError(f"card field {path!r}: expected a list, got {value!r:.60}")
        return [_convert(args[0], v, f"{path}.{i}") for i, v in enumerate(value)] if args else list(value)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise CardError(f"card field {path!r}: expected a mapping, got {value!r:.60}")
        if args:
            return {str(k): _convert(args[1], v, f"{path}.{k}") for k, v in value.items()}
        return dict(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise CardError(f"card field {path!r}: expected true/false, got {value!r:.60}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise CardError(f"card field {path!r}: expected an integer, got {str(value)[:60]!r}")
        if abs(value) > MAX_CARD_INT:
            raise CardError(f"card field {path!r}: an integer of {len(format(value, 'x')) * 1.2:.0f} digits is out of "
                            f"range (at most {MAX_CARD_INT:,})")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CardError(f"card field {path!r}: expected a number, got {str(value)[:60]!r}")
        if isinstance(value, int) and abs(value) > MAX_CARD_INT or not math.isfinite(value):
            raise CardError(f"card field {path!r}: expected a finite number in range")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise CardError(f"card field {path!r}: expected a string, got {value!r:.60}")
        return value
    return value
