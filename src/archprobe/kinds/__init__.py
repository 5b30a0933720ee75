"""The registry of mechanisms: one module per mixer kind (kinds/attention.py ... kinds/short_conv.py) or FFN kind
beyond kinds/ffn.py's (kinds/rwkv_channel.py), each defining
its `Kind` (spec.py): label and colour, feature id and attrs, the cache formula memory sums, its nn module's
arguments (`Args`) with the hook that reads them from the card, the module it builds, the roles it binds and how
its layers are detected (`detect`, tried in `detect_order`: mixer_detectors). Every stage reads it instead of
lists of its own, so a kind is handled everywhere or refused by name; adding a mechanism is its module here
(found by name, no list to edit), its nn module and its tests (tests/structure/test_kinds_registry.py walks the
registry); HybridConfig and validate need no edit."""

from __future__ import annotations

import importlib
import pkgutil

from archprobe.kinds import absent, ffn
from archprobe.kinds.spec import CacheContext, Kind

# every module of this package but these is one mechanism: a new kind is its module, nothing to list here
NOT_MECHANISMS = {"spec", "ffn", "absent", "formulas"}
MECHANISMS = tuple(importlib.import_module(f"{__name__}.{name}")
                   for name in sorted(m.name for m in pkgutil.iter_modules(__path__)) if name not in NOT_MECHANISMS)

# a mechanism module's kinds are mixers or FFNs by their `role` (kinds/rwkv_channel.py is an FFN)
MIXERS: dict[str, Kind] = {k.name: k for module in MECHANISMS for k in module.KINDS if k.role != "ffn"}
FFNS: dict[str, Kind] = {k.name: k for k in ffn.KINDS} | {
    k.name: k for module in MECHANISMS for k in module.KINDS if k.role == "ffn"}
ABSENT: dict[str, Kind] = {k.name: k for k in absent.KINDS}
ALL: dict[str, Kind] = {**MIXERS, **FFNS, **ABSENT}

# the decoder's mixer type -> the kind that builds it (`swa` is GQA with a window, ...); that kind's name is
# the key of the type's arguments in HybridConfig.mixer_args
BY_NN_KIND: dict[str, Kind] = {}
for _k in (*MIXERS.values(), ABSENT["none"]):
    for _nk in (_k.nn_kind, *_k.nn_variants):
        if _nk is not None:
            BY_NN_KIND.setdefault(_nk, _k)

__all__ = ["ABSENT", "ALL", "BY_NN_KIND", "FFNS", "MIXERS", "CacheContext", "Kind", "colour", "label",
           "mixer_detectors"]


def mixer_detectors() -> list:
    """The mixer kinds' detectors in the order structure/bind_mixer.py tries them: by `detect_order`, then
    name; a detector several kinds share (kinds/attention.py's gqa / mha / mqa) once. Read from MIXERS at each
    call. The order is the precedence between readings of the same shapes:

    * 0: a new mechanism with a signature of its own (the default)
    * 10: RWKV-4 (token-shift mixes and per-channel decay / bonus vectors)
    * 20-70, layers with depthwise convs: KDA (three q / k / v convs or one fused, a per-channel decay bias),
      RG-LRU (block-diagonal gates), Mamba (an A grid [C, N]), Mamba-2 (three per-head vectors), Gated
      DeltaNet (two; or split q / k / v convs), a short-conv block (a conv on the hidden width)
    * 100-140, layers without them: MoA (an expert bank of attention projections), MLA (a rank bottleneck with
      a latent norm), low-rank K/V (one without), lightning attention (a per-head decay rate), and softmax
      attention, the most general reading of matrices, last."""
    out: list = []
    for k in sorted(MIXERS.values(), key=lambda k: (k.detect_order, k.name)):
        if k.detect is not None and k.detect not in out:
            out.append(k.detect)
    return out


def label(kind: str) -> str:
    """The short label of `kind`; a kind the registry lacks is shown as itself."""
    k = ALL.get(kind) if isinstance(kind, str) else None
    return k.label if k else str(kind)


def colour(kind: str, default: str = "#7f8c8d") -> str:
    k = ALL.get(kind) if isinstance(kind, str) else None
    return k.colour if k else default
