"""KDA throughput: our kda_chunked vs transformers' torch fallbacks (issue 3 anchors).

Rows: B=1, (H=4, K=V=64) and (H=8, K=V=128), T in {512, 2048, 8192}, fp32, forward only; ours at
chunk 32 (the modules' default, the fastest here) and at the op's default chunk 64.
This machine's speed drifts by 20-30% from minute to minute, so the forms are timed round-robin after a
warm-up: each anchor is timed once to find the faster one, then the faster anchor and our two chunk sizes
take turns for ROUNDS rounds. A row's tokens/s is its median round; a ratio is the median of the
per-round ratios (both sides of each one measured within seconds of each other).
The roofline is the yardstick of ../shared/README.md ("anchor figures"): the chunked algorithm's FLOPs per
token and head at C = 64,
  2CK (K decayed products) + 2CK (Q decayed products) + C(K+V) (triangular solve) + 6KV (state reads and
  update) + 2CV (intra-chunk values) = 57,344 at K=V=64,
run at the fp32 matmul peak: the nominal 300 GFLOP/s (FP32_PEAK_FLOPS; ~1.3M tok/s at H=4) and the peak
measured on this machine now. It is a fixed yardstick per shape, whatever chunk a row uses (at C = 32
our kernel does fewer FLOPs than it counts: 40,960 at K=V=64).
Targets: >= 10x the best anchor at T=8192 and >= 10% of the fp32 roofline.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F
from _util import measured_fp32_peak, paired_ratio, round_robin, table

from archprobe.ops.kda import kda_chunked

PEAK_FLOPS = float(os.environ.get("FP32_PEAK_FLOPS", 300e9))


CHUNKS = (32, 64)
ROOFLINE_CHUNK = 64
ROUNDS = int(os.environ.get("KDA_ROUNDS", 7))


def flops_per_token(H, K, V, C):
    return H * (2 * C * K + 2 * C * K + C * (K + V) + 6 * K * V + 2 * C * V)


def anchors():
    try:
        from transformers.models.kimi_linear import modeling_kimi_linear as m
    except ImportError:
        return {}
    def unwrap(f):  # the hub-kernel decorator keeps the torch fallback as __wrapped__
        return getattr(f, "__wrapped__", f)

    return {"transformers chunk_kimi_delta_attention": unwrap(m.chunk_kimi_delta_attention),
            "transformers recurrent_kimi_delta_attention": unwrap(m.recurrent_kimi_delta_attention)}


def inputs(T, H, K):
    gen = torch.Generator().manual_seed(0)
    q = F.normalize(torch.randn(1, T, H, K, generator=gen), dim=-1)
    k = F.normalize(torch.randn(1, T, H, K, generator=gen), dim=-1)
    v = torch.randn(1, T, H, K, generator=gen)
    g = -5 * torch.sigmoid(torch.randn(1, T, H, K, generator=gen))
    beta = torch.sigmoid(torch.randn(1, T, H, generator=gen))
    return q, k, v, g, beta


def main():
    torch.set_num_threads(os.cpu_count() or 1)
    lengths = [int(x) for x in os.environ.get("KDA_T", "512,2048,8192").split(",")]
    rows, verdicts = [], []
    peer = anchors()
    for H, K in ((4, 64), (8, 128)):
        roof = PEAK_FLOPS / flops_per_token(H, K, K, ROOFLINE_CHUNK)
        for T in lengths:
            args = inputs(T, H, K)
            forms = {name: (lambda fn=fn, args=args: fn(*args, initial_state=None, output_final_state=False))
                     for name, fn in peer.items()}
            screen = round_robin(forms, rounds=1) if len(forms) > 1 else {}
            best = min(screen, key=lambda n: screen[n][0]) if screen else next(iter(forms), None)
            ours = {f"archprobe kda_chunked C={C}": (lambda C=C, args=args: kda_chunked(*args, chunk_size=C))
                    for C in CHUNKS}
            timed = round_robin(({best: forms[best]} if best else {}) | ours, rounds=ROUNDS)
            times = {name: t[0] for name, t in screen.items()} | {name: t[0] for name, t in timed.items()}
            o = forms[best]()[0] if best else None
            for name in forms:
                note = "faster anchor" if name == best else "slower anchor (timed once)"
                rows.append([f"H={H} K=V={K}", T, name, f"{T / times[name]:,.0f}", note, "-"])
            for C in CHUNKS:
                name = f"archprobe kda_chunked C={C}"
                ratio = paired_ratio(timed, best, name) if best else None
                share = T / times[name] / roof
                vs = f"{ratio:.1f}x the faster anchor" if ratio else "no anchor"
                err = f"{((o - ours[name]()[0]).norm() / o.norm()).item():.1e}" if o is not None else "-"
                rows.append([f"H={H} K=V={K}", T, name, f"{T / times[name]:,.0f}",
                             f"{share:.1%} of roofline, {vs}", err])
                if T == 8192 and ratio:
                    verdicts.append((H, K, C, ratio, share))
    print(table(rows, ["shape", "T", "implementation", "tokens/s (median)", "ratios (median of paired rounds)",
                       "rel err vs anchor"]))
    here = measured_fp32_peak()
    for H, K, C, r_anchor, r_roof in verdicts:
        print(f"T=8192 H={H} K=V={K} C={C}: {r_anchor:.1f}x the best anchor (target >= 10), "
              f"{r_roof:.1%} of the {PEAK_FLOPS / 1e9:.0f} GFLOP/s roofline, {r_roof * PEAK_FLOPS / here:.1%} of the "
              f"roofline at the fp32 matmul peak measured here ({here / 1e9:.0f} GFLOP/s) (target >= 10%)")


if __name__ == "__main__":
    sys.exit(main())
