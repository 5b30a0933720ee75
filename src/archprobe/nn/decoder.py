"""A configurable hybrid decoder: per-layer mixer x FFN x residual, from a config mirroring config.json.

The per-layer plan is data (`HybridConfig.plan()`), resolved once and printable: mixer types from the
registry (`MIXERS`: kda, mla, gqa, swa, mamba2, ..., none), FFNs `dense | moe | latent_moe | none` (and
the FFN kinds' own), one residual kind for the model (archprobe.nn.residual). Each layer is built from a
`LayerSpec`: its mixers' types with their kinds' own arguments (archprobe.kinds.<kind>.Args, given as
`HybridConfig.mixer_args`), its FFN and the layer's config; HybridConfig itself holds no mixer's arguments.
Parameter names follow the Kimi/K3 checkpoints (`self_attn`, `mlp` for dense, `block_sparse_moe`
for MoE, `input_layernorm`, `self_attention_res_proj`, ...). Presets are functions in archprobe.nn.presets.
Incremental decoding: `forward(ids, caches=..., use_cache=True)` returns per-layer caches (MLA
latent, KDA state + conv, KV); generating token by token equals the full forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import torch
from torch import nn

from archprobe.kinds import BY_NN_KIND
from archprobe.kinds import FFNS as FFN_KINDS
from archprobe.kinds.spec import ModelContext
from archprobe.nn.moe import ACTIVATIONS, MLP, MoE
from archprobe.nn.norm import NORMS, make_norm
from archprobe.nn.positions import SINUSOIDS, sinusoidal_positions
from archprobe.nn.residual import RESIDUALS, AttnResState, PseudoQuery

MIXERS = tuple(BY_NN_KIND)   # every mixer type a kind spec builds (archprobe.kinds), `none` included
FFNS = ("dense", "moe", "latent_moe", "none", *(k for k, s in FFN_KINDS.items() if s.build is not None))
BLOCKS = ("pre", "post", "sandwich", "parallel", "parallel_shared", "norm_residual")
# norm placement -> the layer's module attribute, for the mixer branch and the FFN branch
MIXER_NORMS = (("pre_mixer", "input_layernorm"), ("post_mixer", "post_mixer_norm"),
               ("post_mixer_sum", "post_mixer_sum_norm"))
FFN_NORMS = (("pre_ffn", "post_attention_layernorm"), ("post_ffn", "post_ffn_norm"),
             ("post_ffn_sum", "post_ffn_sum_norm"))


@dataclass
class HybridConfig:
    """Field names are the upstream config.json keys; `mixer_types`/`ffn_types` are the plan.

    Unknown keys read by a config.json reader (archprobe.nn.presets.from_kimi_config) are kept in `extra`.
    Invalid combinations raise ValueError naming the field.
    """

    vocab_size: int = 256
    hidden_size: int = 64
    num_hidden_layers: int = 2
    rms_norm_eps: float = 1e-5
    norm_style: str = "standard"        # "zero_centered": gain (1 + weight), Qwen3-Next
    mixer_types: tuple[str, ...] = ()
    parallel_mixer_types: tuple[str, ...] = ()   # a second mixer on the same normed input, summed (Falcon-H1)
    ffn_types: tuple[str, ...] = ()
    residual: str = "prenorm"
    attn_res_block_size: int | None = None
    tie_word_embeddings: bool = False
    # each mixer kind's module arguments: {kind: {argument: value}} under the kind's own names
    # (archprobe.kinds.<kind>.Args, e.g. {"kda": {"num_heads": 8}}); a kind not named runs on its defaults;
    # `gqa` holds the arguments of every softmax-attention type (swa, gqa_headgate, gqa_indexer)
    mixer_args: dict = field(default_factory=dict)
    # FFN / MoE
    intermediate_size: int = 128
    hidden_act: str = "silu"
    activation_situ_beta: float = 4.0
    activation_situ_linear_beta: float = 25.0
    gated_ffn: bool = True
    num_experts: int = 8
    num_experts_per_token: int = 2
    moe_intermediate_size: int = 32
    num_shared_experts: int = 1
    shared_expert_width: int | None = None
    routed_expert_hidden_size: int | None = None
    latent_moe_use_norm: bool = False
    latent_names: tuple[str, str, str] = ("routed_expert_down_proj", "routed_expert_up_proj", "routed_expert_norm")
    moe_routing_space: str = "hidden"
    moe_router_activation_func: str = "sigmoid"
    moe_router_bias: bool = True
    moe_renormalize: bool = True
    routed_scaling_factor: float = 1.0
    shared_expert_gate: bool = False     # Qwen3-Next: one shared expert scaled by sigmoid(gate x)
    n_group: int = 1
    topk_group: int = 1
    expert_storage: str = "dense"      # "mxfp4": keep routed experts packed, dequantize on use (validate)
    router_logit_bias: bool = False    # gpt-oss: the router is a Linear with a bias
    expert_bias: bool = False          # gpt-oss: biases on the experts' projections
    moe_weight_on: str = "output"      # "input": the routing weight scales the expert's input (Llama 4)
    moe_sparsemixer_eps: float = 0.01  # router "sparsemixer" (PhiMoE): router_jitter_noise
    shared_combine: str = "sum"        # "average": (routed + shared) / 2 (Cohere2-MoE)
    moe_bias_on_logits: bool = False   # the selection bias is added to the logits, not the scores (Kolibri)
    moe_out_bias: bool = False         # a bias [H] added to the experts' sum (JetMoE)
    group_score: str = "top2_sum"      # group-limited routing ranks groups by top-2 sum (V3) or max (V2)
    glu_limit: float = 7.0             # swiglu_oss clamp (gpt-oss swiglu_limit)
    # the families' switches: norms and their placement, biases, model-level extras
    block: str = "pre"                 # pre | post | sandwich | parallel | parallel_shared (see DecoderLayer)
    norm_placements: tuple | None = None  # which of pre_mixer, pre_ffn, post_mixer, post_ffn exist; None: the block's
    #                                       (post_mixer_sum, post_ffn_sum: post-LN, the norm after the residual add)
    ffn_sub_norm: bool = False         # BitNet: a norm on the FFN's inner width before down_proj
    mlp_bias: bool = False
    residual_multiplier: float = 1.0   # Granite: x + m * f(x)
    # block norm_residual (MiniMax-01): x = a n(x) + b f(n(x)) at the mixer, then at the FFN: (a, b, a', b')
    norm_residual_scales: tuple = (1.0, 1.0, 1.0, 1.0)
    embed_scale: float = 1.0           # Gemma sqrt(H), Granite embedding_multiplier
    learned_positions: int = 0         # rows of a learned absolute position table (GPT-2); 0: none
    position_offset: int = 0           # OPT reads row t + 2
    sinusoidal_positions: str | None = None  # computed absolute positions: vaswani (CTRL) / tensor2tensor (XGLM)
    embed_norm: bool = False           # BLOOM: a norm right after the embedding
    embed_dim: int | None = None       # OPT-350m: embeddings E wide, projected E -> H in and H -> E before the head
    head_bias: bool = False
    final_norm: bool = True
    logit_scale: float = 1.0           # Cohere logit_scale; Granite 1 / logits_scaling
    final_softcap: float | None = None  # Gemma 2: cap * tanh(logits / cap)
    # per-layer exceptions: {layer: {field: value}} (a norm eps, a local rope in mixer_args: merged per kind)
    layer_overrides: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        n = self.num_hidden_layers
        self.mixer_types = tuple(self.mixer_types) or ("gqa",) * n
        self.ffn_types = tuple(self.ffn_types) or ("dense",) * n
        self.parallel_mixer_types = tuple(self.parallel_mixer_types) or ("none",) * n
        for name, values, allowed in (("mixer_types", self.mixer_types, MIXERS), ("ffn_types", self.ffn_types, FFNS),
                                      ("parallel_mixer_types", self.parallel_mixer_types, MIXERS)):
            if len(values) != n:
                raise ValueError(f"{name} has {len(values)} entries, num_hidden_layers is {n}")
            bad = [v for v in values if v not in allowed]
            if bad:
                raise ValueError(f"{name}: unknown kind(s) {bad}; known: {allowed}")
        if self.residual not in RESIDUALS:
            raise ValueError(f"residual: {self.residual!r} is not one of {RESIDUALS}")
        if self.residual == "attnres_block" and not self.attn_res_block_size:
            raise ValueError("residual='attnres_block' needs attn_res_block_size")
        if self.norm_style not in NORMS + ("standard",):
            raise ValueError(f"norm_style: {self.norm_style!r} is not one of {NORMS}")
        if self.block not in BLOCKS:
            raise ValueError(f"block: {self.block!r} is not one of {BLOCKS}")
        bad = [i for i in self.layer_overrides if not 0 <= int(i) < n]
        if bad:
            raise ValueError(f"layer_overrides: layers {bad} do not exist (num_hidden_layers is {n})")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act: {self.hidden_act!r} is not one of {ACTIVATIONS}")
        if self.sinusoidal_positions is not None and self.sinusoidal_positions not in SINUSOIDS:
            raise ValueError(f"sinusoidal_positions: {self.sinusoidal_positions!r} is not one of {SINUSOIDS}")

        owners = {b.name: b for b in BY_NN_KIND.values() if b.args is not None}
        bad = sorted(set(self.mixer_args) - set(owners))
        if bad:
            raise ValueError(f"mixer_args: {bad} are not mixer kinds with arguments; known: {sorted(owners)}")
        for name, given in self.mixer_args.items():    # a misspelt argument is named here, used or not
            _kind_args(owners[name], given)
        for i in self.layer_overrides:
            self.layer_spec(int(i))

    def plan(self) -> list[tuple[str, str, str]]:
        return [(m, f, self.residual) for m, f in zip(self.mixer_types, self.ffn_types, strict=True)]

    def for_layer(self, index: int) -> HybridConfig:
        """This config with layer `index`'s overrides applied (itself when it has none); an override's
        `mixer_args` is merged into the model's, kind by kind."""
        over = self.layer_overrides.get(index)
        if not over:
            return self
        over = dict(over)
        if "mixer_args" in over:
            args = {kind: dict(kw) for kind, kw in self.mixer_args.items()}
            for kind, kw in over.pop("mixer_args").items():
                args.setdefault(kind, {}).update(kw)
            over["mixer_args"] = args
        return replace(self, **over, layer_overrides={})

    def mixer_spec(self, kind: str) -> MixerSpec:
        """A mixer type's module arguments in this config: its kind's Args with `mixer_args[kind]` applied."""
        builder = BY_NN_KIND[kind]
        if builder.args is None:
            return MixerSpec(kind, None)
        return MixerSpec(kind, _kind_args(builder, self.mixer_args.get(builder.name, {})))

    def layer_spec(self, index: int) -> LayerSpec:
        """What DecoderLayer `index` builds: its mixers with their arguments, its FFN, this layer's config."""
        cfg = self.for_layer(index)
        return LayerSpec(index, cfg.mixer_spec(cfg.mixer_types[index]),
                         cfg.mixer_spec(cfg.parallel_mixer_types[index]), cfg.ffn_types[index], cfg)


def _kind_args(builder, given: dict):
    """`builder`'s Args with `given` applied; an argument the kind does not have is a ValueError naming it."""
    known = [f.name for f in fields(builder.args)]
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(f"mixer_args[{builder.name!r}]: unknown argument(s) {unknown}; known: {known}")
    return builder.args(**given)


@dataclass(frozen=True)
class MixerSpec:
    """One mixer of a layer: its type (a key of archprobe.kinds.BY_NN_KIND) and its kind's arguments."""
    kind: str
    args: object = None          # archprobe.kinds.<kind>.Args; None for `none`


@dataclass(frozen=True)
class LayerSpec:
    """Layer `index` as data: the mixer and parallel mixer with their arguments, the FFN type, and the layer's
    config (overrides applied), which holds the FFN's arguments, the block, norms and residual."""
    index: int
    mixer: MixerSpec
    parallel_mixer: MixerSpec
    ffn: str
    config: HybridConfig


def _mixer(spec: MixerSpec, model: ModelContext) -> nn.Module | None:
    """The module of one mixer: its kind's build hook on its own arguments (archprobe.kinds); None for none."""
    builder = BY_NN_KIND.get(spec.kind)
    return builder.build(spec.args, spec.kind, model) if builder is not None and builder.build is not None else None


def _ffn(cfg: HybridConfig, kind: str) -> nn.Module | None:
    H, betas = cfg.hidden_size, (cfg.activation_situ_beta, cfg.activation_situ_linear_beta)
    if kind == "dense":
        return MLP(H, cfg.intermediate_size, cfg.hidden_act, cfg.gated_ffn, betas, cfg.mlp_bias, cfg.glu_limit,
                   sub_norm=cfg.norm_style if cfg.ffn_sub_norm else None, norm_eps=cfg.rms_norm_eps)
    if kind in ("moe", "latent_moe"):
        shared = cfg.shared_expert_width if cfg.shared_expert_width is not None else (
            cfg.num_shared_experts * cfg.moe_intermediate_size)
        return MoE(H, cfg.num_experts, cfg.num_experts_per_token, cfg.moe_intermediate_size,
                   activation=cfg.hidden_act, gated=cfg.gated_ffn, score=cfg.moe_router_activation_func,
                   router_bias=cfg.moe_router_bias, renormalize=cfg.moe_renormalize, scale=cfg.routed_scaling_factor,
                   groups=cfg.n_group, topk_groups=cfg.topk_group,
                   shared_width=shared or None,
                   latent_size=cfg.routed_expert_hidden_size if kind == "latent_moe" else None,
                   routing_space=cfg.moe_routing_space, latent_norm=cfg.latent_moe_use_norm,
                   latent_names=cfg.latent_names, situ_betas=betas, norm_eps=cfg.rms_norm_eps,
                   expert_storage=cfg.expert_storage, shared_gate=cfg.shared_expert_gate,
                   router_logit_bias=cfg.router_logit_bias, expert_bias=cfg.expert_bias, group_score=cfg.group_score,
                   glu_limit=cfg.glu_limit, shared_bias=cfg.mlp_bias, weight_on=cfg.moe_weight_on,
                   sparsemixer_eps=cfg.moe_sparsemixer_eps, shared_combine=cfg.shared_combine,
                   bias_on_logits=cfg.moe_bias_on_logits, out_bias=cfg.moe_out_bias)
    spec = FFN_KINDS.get(kind)      # an FFN mechanism with an nn module of its own: its kind's build hook
    return spec.build(cfg, kind) if spec is not None and spec.build is not None else None


def check_stateful_ffn(block: str, residual: str, index: int, kind: str) -> None:
    """A stateful FFN (RWKV channel mixing) runs on the sequential path of HybridDecoder.hidden_states only
    (mixer, then FFN, each added; depth_weights mixes after the block): refuse the blocks and residuals
    that would otherwise run it as a stateless FFN, silently wrong or failing deep inside forward. Also
    validate's plan asks it, so a card gets `unsupported` before any layer is built."""
    field, value = (("block", block) if block not in ("pre", "post", "sandwich") else
                    ("residual", residual) if residual == "gated" or residual.startswith("attnres")
                    else (None, None))
    if field is not None:
        raise ValueError(f"layer {index}: ffn_types[{index}] = {kind!r} keeps a state across tokens, which "
                         f"archprobe runs only in a pre, post or sandwich block on a plain or depth_weights "
                         f"residual; {field} = {value!r} is not supported with it")


class DecoderLayer(nn.Module):
    """One layer: mixer and FFN, each a branch added to the residual stream, normed as `cfg.block` says.

    * `pre`: x + f(norm_pre(x)) (Llama); `post`: x + norm_post(f(x)) (OLMo 2); `sandwich`:
      x + norm_post(f(norm_pre(x))) (Gemma 2/3);
    * `parallel`: x + mixer(n1(x)) + ffn(n2(x)) (GPT-NeoX); `parallel_shared`: one norm feeds both
      (GPT-J, Phi, Cohere, Falcon);
    * `norm_residual`: the residual is the normed stream, x = n1(x) + mixer(n1(x)), then
      x = n2(x) + ffn(n2(x)) (MiniMax-01).
    * the original Transformer's post-LN normalises the residual sum instead: x = n(x + f(x)) (GPT-1,
      OPT with do_layer_norm_before false): placements `post_mixer_sum` / `post_ffn_sum`, any block.
    Norm names: `input_layernorm` (before the mixer), `post_attention_layernorm` (before the FFN, the
    checkpoints' historical name), `post_mixer_norm` and `post_ffn_norm` (after each branch),
    `post_mixer_sum_norm` and `post_ffn_sum_norm` (after each residual add).
    """

    def __init__(self, spec: LayerSpec):
        super().__init__()
        cfg, index = spec.config, spec.index
        H, eps = cfg.hidden_size, cfg.rms_norm_eps
        ffn_kind = spec.ffn
        self.index, self.residual, self.block = index, cfg.residual, cfg.block
        self.multiplier = cfg.residual_multiplier
        self.norm_residual_scales = cfg.norm_residual_scales
        pre, post = cfg.block != "post", cfg.block in ("post", "sandwich")
        where = cfg.norm_placements
        if where is None:
            where = (("pre_mixer",) if pre else ()) + (("pre_ffn",) if pre and cfg.block != "parallel_shared" else ())
            where += ("post_mixer", "post_ffn") if post else ()
        model = ModelContext(H, eps, cfg.norm_style)
        self.self_attn = _mixer(spec.mixer, model)
        self.parallel_mixer = _mixer(spec.parallel_mixer, model)
        if self.self_attn is not None or cfg.block == "parallel_shared":
            self._add_norms(MIXER_NORMS, where, cfg.norm_style, H, eps)
        ffn = _ffn(cfg, ffn_kind)
        if getattr(ffn, "stateful", False):
            check_stateful_ffn(cfg.block, cfg.residual, index, ffn_kind)
        if ffn is not None:
            self._add_norms(FFN_NORMS, where, cfg.norm_style, H, eps)
        if ffn_kind == "dense":
            self.mlp = ffn
        elif ffn is not None:
            self.block_sparse_moe = ffn
        if cfg.residual.startswith("attnres"):
            self.self_attention_res = PseudoQuery(H)
            self.mlp_res = PseudoQuery(H)
        elif cfg.residual == "gated":
            self.attn_res_gate = nn.Parameter(torch.ones(H))
            self.mlp_res_gate = nn.Parameter(torch.ones(H))
        elif cfg.residual == "depth_weights":
            w = torch.zeros(index + 2)
            w[-1] = 1.0
            self.dwa_weights = nn.Parameter(w)

    def _add_norms(self, placements, where, style: str, H: int, eps: float) -> None:
        for place, attr in placements:
            if place in where:
                setattr(self, attr, make_norm(style, H, eps))

    @property
    def ffn(self) -> nn.Module | None:
        return getattr(self, "mlp", None) or getattr(self, "block_sparse_moe", None)

    @property
    def parallel(self) -> bool:
        return self.block.startswith("parallel")

    def _branch(self, out: torch.Tensor, post: str) -> torch.Tensor:
        norm = getattr(self, post, None)
        out = norm(out) if norm is not None else out
        return out * self.multiplier if self.multiplier != 1.0 else out

    def after_add(self, x: torch.Tensor, which: str) -> torch.Tensor:
        """The residual stream after a branch was added: normalised there under post-LN (`mixer` / `ffn`)."""
        norm = getattr(self, f"post_{which}_sum_norm", None)
        return norm(x) if norm is not None else x

    def mixer_out(self, x, cache, use_cache):
        if self.self_attn is None:
            return torch.zeros_like(x), None
        n = getattr(self, "input_layernorm", None)
        h = n(x) if n is not None else x
        if self.parallel_mixer is not None:       # both mixers read h; their outputs add (caches kept as a pair)
            c1, c2 = cache if cache is not None else (None, None)
            a, c1 = self.self_attn(h, cache=c1, use_cache=use_cache)
            b, c2 = self.parallel_mixer(h, cache=c2, use_cache=use_cache)
            return self._branch(a + b, "post_mixer_norm"), ((c1, c2) if c1 is not None or c2 is not None else None)
        a, c = self.self_attn(h, cache=cache, use_cache=use_cache)
        return self._branch(a, "post_mixer_norm"), c

    @property
    def stateful_ffn(self) -> bool:
        """An FFN that keeps a state across tokens (RWKV channel mixing): `ffn(h, state)` -> (out, state)."""
        return bool(getattr(self.ffn, "stateful", False))

    def stateful_ffn_out(self, x, state):
        n = getattr(self, "post_attention_layernorm", None)
        out, state = self.ffn(n(x) if n is not None else x, state)
        return self._branch(out, "post_ffn_norm"), state

    def ffn_out(self, x, pin_input: torch.Tensor | None = None):
        """The FFN branch on x; `pin_input` (MoE only) is the input that chooses the experts."""
        f = self.ffn
        if f is None:
            return torch.zeros_like(x)
        n = getattr(self, "input_layernorm" if self.block == "parallel_shared" else "post_attention_layernorm", None)
        h = n(x) if n is not None else x
        out = f(h, pin_input=pin_input) if pin_input is not None else f(h)
        return self._branch(out, "post_ffn_norm")


class HybridDecoder(nn.Module):
    """Embedding [-> projection] [+ learned positions] [-> norm] -> layers (plan from the config)
    -> [AttnRes output mix] -> norm [-> projection] -> lm_head [* logit scale] [-> soft-cap]."""

    def __init__(self, cfg: HybridConfig, build_layers: bool = True):
        """`build_layers=False` allocates only embedding, final norm and head (for streaming validation)."""
        super().__init__()
        self.config = cfg
        H = cfg.hidden_size
        E = cfg.embed_dim or H
        self.embed_tokens = nn.Embedding(cfg.vocab_size, E)
        if cfg.embed_dim:
            self.embed_proj = nn.Linear(E, H, bias=False)
            self.head_proj = nn.Linear(H, E, bias=False)
        if cfg.learned_positions:
            self.embed_positions = nn.Embedding(cfg.learned_positions, H)
        if cfg.embed_norm:
            self.embed_layernorm = make_norm(cfg.norm_style, H, cfg.rms_norm_eps)
        self.layers = nn.ModuleList(DecoderLayer(cfg.layer_spec(i)) for i in range(cfg.num_hidden_layers)
                                    if build_layers)
        if cfg.final_norm:
            self.norm = make_norm(cfg.norm_style, H, cfg.rms_norm_eps)
        if cfg.residual.startswith("attnres"):
            self.output_attn_res = PseudoQuery(H)
        self.lm_head = nn.Linear(E, cfg.vocab_size, bias=cfg.head_bias)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def plan(self) -> list[tuple[str, str, str]]:
        return self.config.plan()

    def embed(self, input_ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Token embeddings [B, T, H] (scaled, plus learned positions from `start`, normed when asked)."""
        cfg = self.config
        x = self.embed_tokens(input_ids)
        if cfg.embed_scale != 1.0:   # Gemma multiplies by sqrt(H) rounded to the activation dtype
            x = x * torch.tensor(cfg.embed_scale, dtype=x.dtype)
        if cfg.embed_dim:
            x = self.embed_proj(x)
        if cfg.learned_positions:
            pos = torch.arange(start, start + input_ids.shape[1], device=input_ids.device) + cfg.position_offset
            if int(pos[-1]) >= cfg.learned_positions:
                raise ValueError(f"position {int(pos[-1])} is beyond the {cfg.learned_positions} learned positions")
            x = x + self.embed_positions(pos)
        if cfg.sinusoidal_positions:
            pos = torch.arange(start, start + input_ids.shape[1], device=input_ids.device) + cfg.position_offset
            x = x + sinusoidal_positions(pos, x.shape[-1], cfg.sinusoidal_positions).to(x.device, x.dtype)
        return self.embed_layernorm(x) if cfg.embed_norm else x

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """lm_head on the final hidden, times the logit scale, soft-capped when the family caps."""
        cfg = self.config
        y = self.lm_head(self.head_proj(h) if cfg.embed_dim else h)
        if cfg.logit_scale != 1.0:
            y = y * cfg.logit_scale
        if cfg.final_softcap:
            y = torch.tanh(y / cfg.final_softcap) * cfg.final_softcap
        return y

    def hidden_states(self, x: torch.Tensor, caches=None, use_cache: bool = False, layer_hook=None, layers=None,
                      routing_pins: dict | None = None):
        """Run the layers on embeddings x [B, T, H]; returns (final hidden before lm_head, caches).

        `layers` replaces `self.layers` with any iterable of DecoderLayers in order, e.g. a generator that
        loads each layer from disk just before it runs (archprobe.validate streams weights this way);
        `layer_hook(i, hidden)` sees each layer's output. `routing_pins` {layer: input} makes layer i's
        MoE choose its experts from that input (validate's --pin-routing) instead of its own.
        """
        cfg = self.config
        caches = list(caches) if caches is not None else [None] * cfg.num_hidden_layers
        layers = self.layers if layers is None else layers
        pins = routing_pins or {}
        new_caches = []
        if cfg.residual.startswith("attnres"):
            state = AttnResState(x, cfg.attn_res_block_size if cfg.residual == "attnres_block" else None)
            for i, layer in enumerate(layers):
                a_in = state.before_attention(layer.self_attention_res, i)
                a, c = layer.mixer_out(a_in, caches[i], use_cache)
                state.add(a)
                m = layer.ffn_out(state.before_ffn(layer.mlp_res), pins.get(i))
                state.add(m)
                new_caches.append(c)
                if layer_hook:
                    layer_hook(i, state.partial if state.partial is not None else m)
            out = state.before_ffn(self.output_attn_res)
        else:
            history = [x]
            for i, layer in enumerate(layers):
                stateful = layer.stateful_ffn      # its cache: (the mixer's, the FFN's state)
                mc, fc = (caches[i] or (None, None)) if stateful else (caches[i], None)
                a, c = layer.mixer_out(x, mc, use_cache)
                if stateful:
                    x = layer.after_add(x + a, "mixer")
                    f, fc = layer.stateful_ffn_out(x, fc)
                    x = layer.after_add(x + f, "ffn")
                    c = (c, fc) if use_cache or c is not None else None
                elif layer.parallel:
                    x = x + a + layer.ffn_out(x, pins.get(i))
                elif layer.block == "norm_residual":     # ffn_out norms its own input: the same n2(x)
                    am, bm, af, bf = layer.norm_residual_scales
                    x = am * layer.input_layernorm(x) + bm * a
                    x = af * layer.post_attention_layernorm(x) + bf * layer.ffn_out(x, pins.get(i))
                elif cfg.residual == "gated":
                    x = x + layer.attn_res_gate * a
                    x = x + layer.mlp_res_gate * layer.ffn_out(x, pins.get(i))
                else:
                    x = layer.after_add(x + a, "mixer")
                    x = layer.after_add(x + layer.ffn_out(x, pins.get(i)), "ffn")
                if cfg.residual == "depth_weights":  # h_{i+1} = block output; mix h_0..h_{i+1}
                    history.append(x)
                    x = torch.einsum("n,n...->...", layer.dwa_weights.to(x.dtype), torch.stack(history))
                new_caches.append(c)
                if layer_hook:
                    layer_hook(i, x)
            out = x
        return (self.norm(out) if cfg.final_norm else out), new_caches

    def forward(self, input_ids: torch.Tensor, caches=None, use_cache: bool = False, logits_to_keep: int = 0):
        """Logits [B, T, V] (only the last `logits_to_keep` positions when > 0, as serving engines do)."""
        start = 0
        if caches is not None and caches[0] is not None:
            start = getattr(caches[0], "pos", None) or getattr(caches[0], "length", 0)
        h, new_caches = self.hidden_states(self.embed(input_ids, start), caches, use_cache)
        logits = self.logits(h[:, -logits_to_keep:] if logits_to_keep else h)
        return (logits, new_caches) if use_cache or caches is not None else logits
