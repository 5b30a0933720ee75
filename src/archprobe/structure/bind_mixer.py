"""The token mixer of a layer from shapes; config numbers (heads, head dims) where shapes cannot say.

Each mixer kind detects itself (its `detect` in kinds/<kind>.py, with the shape helpers they share in
structure/mixer_shapes.py); this asks them in the registry's order (kinds.mixer_detectors: `detect_order`,
the precedence between readings of the same shapes) and takes the first that answers. Names break ties
only between same-shaped tensors (q vs k vs v, A_log vs D vs dt_bias).
"""

from __future__ import annotations

from archprobe.kinds import mixer_detectors
from archprobe.structure.bind_ffn import Bound
from archprobe.structure.modules import Module
from archprobe.structure.widths import mat, split_io


def bind_mixer(mods: list[Module], H: int, cfg) -> Bound | None:
    """The first answer of the mixer kinds' detectors, in their order; None when no kind reads the group."""
    for detect in mixer_detectors():
        found = detect(mods, H, cfg)
        if found is not None:
            return found
    return None


def has_mixer_signature(mods: list[Module], H: int) -> bool:
    """Convs, a rank bottleneck, or three or more readers of H: a mixer (an MLP has at most two)."""
    if any(len(m.shape) == 3 and m.shape[1] == 1 and m.shape[2] > 1 for m in mods):
        return True
    mats = [m for m in mods if mat(m) is not None and len(m.shape) == 2]
    for transposed in (False, True):
        readers, writers = split_io(mats, H, transposed)
        if len(readers) >= 3 and writers:
            return True
    return False
