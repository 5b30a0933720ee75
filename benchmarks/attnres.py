"""Overhead of Block Attention Residuals over a plain pre-norm residual.

A 12-layer decoder (GQA + dense SwiGLU FFN), D=512, T=1024, batch 1, fp32, forward only; the same
model with `residual="attnres_block"` (block size 4, so 3 banked blocks + the embedding) and with
`attnres_full`. Target: block AttnRes costs <= 10% over the plain residual. The three are timed
round-robin (5 rounds after a warm-up), so the machine's drift hits each alike; an overhead is the
median of the paired rounds.
"""

from __future__ import annotations

import torch
from _util import paired_ratio, round_robin, table

from archprobe.nn.decoder import HybridConfig, HybridDecoder


def model(residual: str) -> HybridDecoder:
    torch.manual_seed(0)
    cfg = HybridConfig(vocab_size=1024, hidden_size=512, num_hidden_layers=12,
                       mixer_args={"gqa": dict(num_heads=8, num_kv_heads=8, head_dim=64)},
                       intermediate_size=1536, residual=residual,
                       attn_res_block_size=4 if residual == "attnres_block" else None)
    return HybridDecoder(cfg).eval()


def main():
    ids = torch.randint(0, 1024, (1, 1024))
    with torch.no_grad():
        models = {residual: model(residual) for residual in ("prenorm", "attnres_block", "attnres_full")}
        timed = round_robin({r: (lambda m=m: m(ids)) for r, m in models.items()}, rounds=5)
    overhead = {r: paired_ratio(timed, r, "prenorm") - 1 for r in timed}
    rows = [[r, f"{t:.3f}", f"{overhead[r]:+.1%}"] for r, (t, _) in timed.items()]
    print(table(rows, ["residual", "seconds (median of 5)", "overhead vs prenorm (median of paired rounds)"]))
    print(f"\nblock AttnRes overhead: {overhead['attnres_block']:.1%} (target <= 10%)")


if __name__ == "__main__":
    main()
