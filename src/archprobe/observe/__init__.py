"""`archprobe observe`: the seed's hypotheses measured on a model's own weights and activations.

Two passes, both streamed: the weights scan (weights.py, one stored tensor at a time) and a forward over a
few texts through validate's stream (one layer resident), recorded by recorder.py: routing (routing.py),
depth and massive activations (depth.py), linear-attention horizons and MLA ranks (horizons.py). The
findings (findings.py) name what is unusual; the document is `archprobe.observe/1`.
"""

from __future__ import annotations

from archprobe.observe.run import observe

__all__ = ["observe"]
