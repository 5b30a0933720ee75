"""The registry of mechanisms: one module per mixer kind (kinds/gqa.py ... kinds/short_conv.py) or FFN kind
beyond kinds/ffn.py's (kinds/rwkv_channel.py), each defining
its `Kind` (spec.py): label and colour, feature id and attrs, the cache formula memory sums, its nn module's
arguments (`Args`) with the hook that reads them from the card, the module it builds and the roles it binds.
Every stage reads it instead of lists of its own, so a kind is handled everywhere or refused by name; adding a
mechanism is its module here (found by name, no list to edit), its nn module and its tests (tests/structure/
test_kinds_registry.py walks the registry); HybridConfig and validate need no edit."""

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

__all__ = ["ABSENT", "ALL", "BY_NN_KIND", "FFNS", "MIXERS", "CacheContext", "Kind", "colour", "label"]


def label(kind: str) -> str:
    """The short label of `kind`; a kind the registry lacks is shown as itself."""
    k = ALL.get(kind) if isinstance(kind, str) else None
    return k.label if k else str(kind)


def colour(kind: str, default: str = "#7f8c8d") -> str:
    k = ALL.get(kind) if isinstance(kind, str) else None
    return k.colour if k else default
