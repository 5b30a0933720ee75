"""What one mechanism tells every stage about itself: a `Kind`. Each mechanism's module (kinds/gqa.py,
kinds/mla.py, ...) defines its Kind; kinds/__init__.py collects them into the registry the stages read.

Hooks are plain functions so a module stays readable top to bottom; the heavy ones (the nn module, the
validate fields) import torch / archprobe.validate inside, so reading labels or features stays light."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheContext:
    """What a cache formula needs besides the card's mixer: tokens held, page size, element sizes."""
    T: int                      # tokens the sequence holds
    pad: int                    # tokens per cache page (1: none)
    kv_b: float                 # bytes per KV / latent element
    act_b: float                # bytes per conv-cache element (the activation dtype)
    state_b: float              # bytes per recurrent-state element
    swa_extra_block: bool = False   # a sliding-window layer holds one page beyond its window (vLLM)
    hidden_size: int | None = None  # the model's width H: an FFN's token-shift state (RWKV channel mixing)


@dataclass(frozen=True)
class ModelContext:
    """The few model-level values every mixer module may need beside its own arguments."""
    hidden_size: int
    norm_eps: float = 1e-5      # the layer norms' eps (a module's own norms use it unless its args say)
    norm_style: str = "standard"   # the layer norms' kind (archprobe.nn.norm), for q/k norms and the like


@dataclass(frozen=True)
class Kind:
    name: str                                   # the card's `kind` value
    role: str                                   # mixer | ffn | either
    label: str                                  # short label: the terminal's layer plan, the report
    colour: str                                 # the report's layer strip and legend
    feature: str | None = None                  # inspect feature id (spec/contracts.md); None: no row of its own
    attrs: Callable[[object, int | None], dict] | None = None   # (the card's Mixer/Ffn, hidden size) -> attrs
    # memory: (mixer, CacheContext) -> (per-layer label, bytes one sequence keeps); None: no formula
    cache: Callable[[object, CacheContext], tuple[str, float]] | None = None
    required: tuple[str, ...] = ()              # the card's mixer fields the math needs (None there: unknown)
    recurrent: bool = False                     # a state instead of a growing cache, no positions of its own
    # detection: (the layer group's modules, hidden size, config view) -> a Bound (structure/bind_ffn.py) or
    # None. Every mixer kind detects itself here; structure/bind_mixer.py asks the mixer kinds by
    # `detect_order` (kinds.mixer_detectors) and takes the first answer, so a kind's detector may rely on the
    # earlier ones having declined; shape helpers they share are structure/mixer_shapes.py. An FFN kind's
    # detector claims its group as the FFN, before the dense / MoE ones (structure/bind_layer.py's _kind_ffn)
    detect: Callable[[list, int, object], object] | None = None
    detect_order: int = 0                       # lower first, ties by name; 0: before every built-in mixer kind
    tp_replicated: bool = False                 # tensor parallel keeps the whole cache on every device
    act_width: Callable[[object], int] | None = None   # prefill transients per token (values), beyond 4 H
    eager_score_copies: int = 0                 # live [heads, chunk, context] fp32 copies in eager attention
    # validate / nn
    nn_kind: str | None = None                  # the decoder's mixer type this kind runs as
    nn_variants: tuple[str, ...] = ()           # further mixer types the same builder handles (`swa`, ...)
    # a mixer kind's module arguments: a frozen dataclass, its field names the kind's own, its defaults the
    # toy sizes the presets use; the decoder's per-layer spec holds one (archprobe.nn.decoder.LayerSpec)
    args: type | None = None
    fields: Callable[[object, int, Callable[[str], bool], dict], str | None] | None = None
    #   (card, layer index, has(role leaf), out): writes layer i's module arguments (names of `args`) into out;
    #   returns the mixer type when it is not `nn_kind` (a windowed GQA layer runs as `swa`)
    build: Callable[..., object] | None = None
    #   mixer: (args, mixer type, ModelContext) -> nn.Module; FFN kind: (HybridConfig, FFN type) -> nn.Module
    #   (the FFN kinds' arguments are still HybridConfig fields). An FFN module with `stateful = True` returns
    #   (out, state) and HybridDecoder keeps the state in the cache
    roles: dict[str, str] | None = None         # role leaf -> parameter path under the layer's mixer module
    bare_roles: tuple[str, ...] = ()            # role leaves stored without a `.weight` leaf (a bare Parameter)
