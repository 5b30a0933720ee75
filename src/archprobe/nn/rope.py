"""Rotary position embedding, applied at absolute positions so cached keys and new queries agree.

`Rope` is the whole description a layer needs: base theta, how many channels of a head rotate
(partial rotary), the frequency scaling (`default | linear | dynamic | yarn | llama3 | longrope |
proportional`, with their parameters as config.json spells them; `proportional`, Gemma 4: the whole
head in halves, the first partial_rotary_factor of its d/2 frequencies at base^(-2i/d), the rest zero)
and the channel pairing (`interleaved=False`: halves, x[i] with x[i + d/2], Llama/NeoX; `True`:
neighbours (0,1),(2,3),..., GPT-J, Cohere, GLM and DeepSeek checkpoints); `inverse` rotates by the
negative angle (NanoChat). The scaled frequencies
follow the formulas of YaRN (arXiv:2309.00071), Llama 3.1's wavelength smoothing, LongRoPE
(arXiv:2402.13753) and dynamic NTK; the facts were read from transformers' `modeling_rope_utils.py`.
The attention factor (YaRN, LongRoPE) multiplies cos and sin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional")


@dataclass(frozen=True)
class Rope:
    """theta; dim = rotated channels per head (even); `kind` and its `params` (factor,
    original_max_position_embeddings, beta_fast/slow, mscale, mscale_all_dim, low/high_freq_factor,
    short/long_factor, attention_factor, truncate); `max_positions` is the model's max_position_embeddings."""

    theta: float
    dim: int
    kind: str = "default"
    params: dict = field(default_factory=dict, hash=False)   # compared: two layers' ropes differ by a factor too
    interleaved: bool = False
    max_positions: int | None = None
    inverse: bool = False          # rotate by -angle (NanoChat's rotate_half with flipped signs)

    def __post_init__(self):
        if self.kind not in ROPE_TYPES:
            raise ValueError(f"rope type {self.kind!r} is not one of {ROPE_TYPES}")
        if self.dim % 2:
            raise ValueError(f"rope dim {self.dim} must be even")

    def _need(self, key: str):
        if self.params.get(key) is None:
            raise ValueError(f"rope type {self.kind!r} needs {key}")
        return self.params[key]

    def inv_freq(self, seq_len: int) -> tuple[torch.Tensor, float]:
        """(inverse frequencies [dim/2] float32, attention factor) for a sequence of `seq_len` positions."""
        d, base, p = self.dim, float(self.theta), self.params
        exps = torch.arange(0, d, 2, dtype=torch.int64).float() / d
        if self.kind == "default":
            return 1.0 / base ** exps, 1.0
        if self.kind == "linear":
            return 1.0 / base ** exps / self._need("factor"), 1.0
        if self.kind == "proportional":
            angles = int(float(p.get("partial_rotary_factor", 1.0)) * d // 2)
            inv = torch.cat([1.0 / base ** exps[:angles], torch.zeros(d // 2 - angles)])
            return inv / float(p.get("factor") or 1.0), 1.0
        if self.kind == "dynamic":
            maxpos = self.max_positions or self._need("original_max_position_embeddings")
            factor, n = self._need("factor"), max(seq_len, maxpos)
            base = base * ((factor * n / maxpos) - (factor - 1)) ** (d / (d - 2))
            return 1.0 / base ** exps, 1.0
        orig = p.get("original_max_position_embeddings") or self.max_positions
        if orig is None:
            raise ValueError(f"rope type {self.kind!r} needs original_max_position_embeddings")
        factor = p.get("factor")
        if factor is None and self.kind in ("yarn", "longrope"):
            factor = (self.max_positions or orig) / orig
        if self.kind == "llama3":
            return _llama3(1.0 / base ** exps, self._need("factor"), orig, self._need("low_freq_factor"),
                           self._need("high_freq_factor")), 1.0
        if self.kind == "longrope":
            ext = torch.tensor(self._need("long_factor" if seq_len > orig else "short_factor"), dtype=torch.float32)
            att = p.get("attention_factor")
            if att is None:
                att = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
            return 1.0 / (ext * base ** exps), float(att)
        return self._yarn(base, exps, factor, orig)

    def _yarn(self, base: float, exps: torch.Tensor, factor: float, orig: int) -> tuple[torch.Tensor, float]:
        p, d = self.params, self.dim

        def mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        att = p.get("attention_factor")
        if att is None:
            m, m_all = p.get("mscale"), p.get("mscale_all_dim")
            att = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)
        fast, slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1

        def correction_dim(rotations):
            return d * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))

        low, high = correction_dim(fast), correction_dim(slow)
        if p.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, d - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(d // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
        extrapolate = 1 - ramp
        pos = base ** exps
        inv = (1.0 / (factor * pos)) * (1 - extrapolate) + (1.0 / pos) * extrapolate
        return inv, float(att)

    def cos_sin(self, positions: torch.Tensor, seq_len: int | None = None):
        """cos, sin [T, dim] (halves layout, times the attention factor) at `positions` [T]."""
        n = seq_len if seq_len is not None else int(positions.max()) + 1 if positions.numel() else 0
        inv, att = self.inv_freq(n)
        freqs = positions.float()[:, None] * inv.to(positions.device)[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos() * att, emb.sin() * (-att if self.inverse else att)

    def apply(self, x_BTHD: torch.Tensor, positions: torch.Tensor, seq_len: int | None = None) -> torch.Tensor:
        """Rotate the first `dim` channels of x [B, T, H, D]; the rest pass through."""
        cos, sin = self.cos_sin(positions, seq_len)
        r = self.dim
        if r >= x_BTHD.shape[-1]:
            return rotate(x_BTHD, cos, sin, self.interleaved)
        return torch.cat([rotate(x_BTHD[..., :r], cos, sin, self.interleaved), x_BTHD[..., r:]], dim=-1)


def _llama3(inv: torch.Tensor, factor: float, orig: int, low_f: float, high_f: float) -> torch.Tensor:
    """Llama 3.1: long wavelengths divided by `factor`, short ones kept, the band between smoothed."""
    low_wl, high_wl = orig / low_f, orig / high_f
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wl, inv / factor, inv)
    smooth = (orig / wavelen - low_f) / (high_f - low_f)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wl) & ~(wavelen > low_wl)
    return torch.where(medium, smoothed, scaled)


def rotate(x_BTHD: torch.Tensor, cos_TD: torch.Tensor, sin_TD: torch.Tensor, interleaved: bool = False):
    """x * cos + rotate_half(x) * sin in float32; neighbour pairs are de-interleaved to halves, rotated,
    and put back in place, so the output keeps the checkpoint's channel order (a norm or a cache after
    the rotation sees the channels where the reference has them)."""
    D = x_BTHD.shape[-1]
    h = x_BTHD.float()
    if interleaved:
        h = torch.cat([h[..., 0::2], h[..., 1::2]], dim=-1)
    cos, sin = cos_TD[None, :, None, :], sin_TD[None, :, None, :]
    half = torch.cat([-h[..., D // 2:], h[..., : D // 2]], dim=-1)
    out = h * cos + half * sin
    if interleaved:
        out = torch.stack([out[..., : D // 2], out[..., D // 2:]], dim=-1).flatten(-2)
    return out.to(x_BTHD.dtype)


def rope_cos_sin(positions: torch.Tensor, dim: int, theta: float):
    return Rope(theta, dim).cos_sin(positions)


def apply_rope(x_BTHD: torch.Tensor, positions: torch.Tensor, theta: float, interleaved: bool = False):
    """Rotate the whole last dim of x [B, T, H, D] with the default frequencies."""
    return Rope(theta, x_BTHD.shape[-1], interleaved=interleaved).apply(x_BTHD, positions)
