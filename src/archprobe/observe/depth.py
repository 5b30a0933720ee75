"""Depth statistics: how much each layer changes the residual stream, and massive activations.

`cosine_in_out`: the mean over tokens of cos(stream before the layer, stream after it), the collapse
curve (values near 1 everywhere: the layers' representations are alike). `update_ratio`: mean over tokens
of |after - before| / |before|; per sublayer, |branch output| / |its input stream|. A massive activation
(Sun et al., arXiv 2402.17762) is a value of the stream with |x| >= 100 and >= 1000x the median |x|.
"""

from __future__ import annotations

import torch

MASSIVE_ABS, MASSIVE_RATIO = 100.0, 1000.0


def _tokens(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1]).float()


def cosine(before: torch.Tensor, after: torch.Tensor) -> float:
    a, b = _tokens(before), _tokens(after)
    return float(torch.nn.functional.cosine_similarity(a, b, dim=-1, eps=1e-30).mean())


def ratio(part: torch.Tensor, stream: torch.Tensor) -> float:
    p, s = _tokens(part), _tokens(stream)
    return float((p.norm(dim=-1) / s.norm(dim=-1).clamp_min(1e-30)).mean())


def massive(h: torch.Tensor) -> dict:
    """The largest |x| of the stream and where: token position and channel, beside the median |x|."""
    f = _tokens(h).abs()
    flat = torch.nan_to_num(f, nan=0.0, posinf=0.0, neginf=0.0)
    i = int(flat.argmax())
    top = float(flat.reshape(-1)[i])
    median = float(flat.median())
    return {"max_abs": top, "token": i // f.shape[-1], "channel": i % f.shape[-1], "median_abs": median,
            "massive": top >= MASSIVE_ABS and top >= MASSIVE_RATIO * max(median, 1e-30)}


def layer_depth(before: torch.Tensor, after: torch.Tensor) -> dict:
    return {"cosine_in_out": cosine(before, after), "update_ratio": ratio(after.float() - before.float(), before)}
