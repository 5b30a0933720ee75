"""What a layer holds where the card has no kind: no mixer/FFN at all (`none`, nothing cached, nothing built),
or one the card could not explain (`unknown`: memory and validate refuse it, naming the layer)."""

from __future__ import annotations

from archprobe.kinds.spec import Kind

KINDS = [
    Kind("none", "either", "-", "#cccccc", cache=lambda m, c: ("none", 0), nn_kind="none"),
    Kind("unknown", "either", "?", "#7f8c8d"),
]
