"""One tolerance table for every equivalence test, with diagnostics on failure.

`compare(ref, got)` returns max-abs, mean-abs and relative RMS; `assert_close(kind, ref, got)` looks
the bound up by (kind, dtype) and prints all three numbers when it fails. Each non-default bound
carries the error observed when it was set.
"""

from __future__ import annotations

import torch

# rel-RMS bounds: (kind, dtype) -> bound
TOLERANCES = {
    ("same_algorithm", torch.float32): 1e-5,
    ("recurrent_vs_chunked", torch.float32): 1e-5,   # observed <= 2e-6 against a float64 recurrence
    ("cross_implementation", torch.float32): 1e-5,   # transformers vs ours: observed <= 7e-7 (KDA), 0 (MoE)
    # chunked KDA's gradient of the per-channel decay g under strong decay: observed 2.5e-5 (C=16) and
    # 3.4e-5 (C=32) against 8e-8 for the fp32 recurrence. Pairs of tokens add +x to dG_r and -x to dG_s
    # and cancel in the reverse cumsum to dg only up to rounding of x, which grows with the decay span.
    ("decay_gradient", torch.float32): 1e-4,
    ("same_algorithm", torch.bfloat16): 1e-2,
    ("reduction", torch.bfloat16): 2e-2,
}


def compare(ref: torch.Tensor, got: torch.Tensor) -> dict:
    r, g = ref.double(), got.double()
    diff = (g - r).abs()
    rel = (diff.pow(2).mean().sqrt() / r.pow(2).mean().sqrt().clamp_min(1e-30)).item()
    return {"max_abs": diff.max().item() if diff.numel() else 0.0, "mean_abs": diff.mean().item() if diff.numel()
            else 0.0, "rel_rms": rel}


def assert_close(kind: str, ref: torch.Tensor, got: torch.Tensor, dtype: torch.dtype = torch.float32,
                 name: str = "") -> dict:
    if ref.shape != got.shape:
        raise AssertionError(f"{name or kind}: shapes differ, {tuple(ref.shape)} vs {tuple(got.shape)}")
    bound = TOLERANCES[(kind, dtype)]
    stats = compare(ref, got)
    if not stats["rel_rms"] <= bound:
        raise AssertionError(f"{name or kind}: rel_rms {stats['rel_rms']:.3e} > {bound:.1e} "
                             f"(max_abs {stats['max_abs']:.3e}, mean_abs {stats['mean_abs']:.3e})")
    return stats


def gradients(fn, inputs, weight: torch.Tensor, dtype: torch.dtype) -> list[torch.Tensor]:
    """d/d(inputs) of sum(fn(*inputs)[0] * weight), each input a fresh leaf in `dtype`. Fresh, because
    marking the caller's tensors would let one call's gradients accumulate into the next call's."""
    leaves = [t.detach().to(dtype).requires_grad_(True) for t in inputs]
    (fn(*leaves)[0] * weight.to(dtype)).sum().backward()
    return [t.grad for t in leaves]


def assert_fast_gradients(names, inputs, weight: torch.Tensor, exact_fn, reference_fn, fast_fn,
                          bounds: dict | None = None) -> None:
    """The flash-attention rule: each gradient of the fast form (fp32) is off the exact one (exact_fn in
    float64) by at most 2x the fp32 reference form's error, or by its bound (default: the fp32
    recurrent_vs_chunked one)."""
    exact = gradients(exact_fn, inputs, weight, torch.float64)
    reference = gradients(reference_fn, inputs, weight, torch.float32)
    fast = gradients(fast_fn, inputs, weight, torch.float32)
    for name, e, r, f in zip(names, exact, reference, fast, strict=True):
        assert torch.isfinite(f).all(), f"d{name} is not finite"
        err_r, err_f = compare(e, r)["rel_rms"], compare(e, f)["rel_rms"]
        bound = (bounds or {}).get(name, TOLERANCES[("recurrent_vs_chunked", torch.float32)])
        assert err_f <= max(bound, 2 * err_r), f"d{name}: fast form {err_f:.2e}, fp32 reference {err_r:.2e}"
