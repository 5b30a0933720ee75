"""Memory planner accuracy: predicted vs measured for reference-decoder configurations (larger than
the tests'), and K3 at 4k / 128k / 1M next to the naive "parameters x bytes + full KV on every layer".

Measured: a fresh process runs the prefill; exact cache bytes; peak RSS growth minus the framework's
1-token footprint (see tests/memory/test_measured.py).
"""

from __future__ import annotations

import os
import tempfile

from _util import table
from tests.support.decoder_ckpt import planned_vs_measured

from archprobe.memory import plan_memory
from archprobe.nn.decoder import HybridConfig
from archprobe.nn.presets import tiny_k3, tiny_nemotron_latent, variant
from archprobe.structure.inspect import inspect_checkpoint
from archprobe.writers.synthetic import K3Dims, write_k3_checkpoint

WIDE = dict(vocab_size=32000, hidden_size=512)
CONFIGS = {
    "gqa": (HybridConfig(**WIDE, num_hidden_layers=6, intermediate_size=1024,
                         mixer_args={"gqa": dict(num_heads=8, num_kv_heads=2, head_dim=64)}), [(1024, 1), (4096, 1)]),
    "mla": (HybridConfig(**WIDE, num_hidden_layers=4, mixer_types=("mla",) * 4,
                         mixer_args={"mla": dict(q_lora_rank=128, kv_lora_rank=64)}), [(2048, 1)]),
    "kda": (HybridConfig(**WIDE, num_hidden_layers=4, mixer_types=("kda",) * 4,
                         mixer_args={"kda": dict(num_heads=8, head_dim=64)}), [(4096, 1)]),
    "hybrid_k3": (tiny_k3(**WIDE, num_hidden_layers=8), [(1024, 2), (4096, 1)]),
    "latent_moe": (tiny_nemotron_latent(**WIDE), [(2048, 1)]),
    "attnres": (variant("attnres_block", **WIDE), [(2048, 1)]),
    "sliding_window": (HybridConfig(**WIDE, num_hidden_layers=4, mixer_types=("swa", "swa", "swa", "gqa"),
                                    mixer_args={"gqa": dict(sliding_window=256)}), [(4096, 1)]),
    "lowrank_kv": (variant("kv_compression", **WIDE), [(2048, 2)]),
}


def accuracy_rows():
    rows = []
    for name, (cfg, runs) in CONFIGS.items():
        with tempfile.TemporaryDirectory() as d:
            for r in planned_vs_measured(cfg, runs, d):
                plan, got, peak = r["plan"], r["got"], r["measured_peak"]
                rows.append([name, r["context"], r["batch"], f"{plan['cache_bytes']:,}", f"{got['cache']:,}",
                             f"{plan['cache_bytes'] / got['cache']:.4f}", f"{plan['peak_bytes'] / 2**20:.1f}",
                             f"{peak / 2**20:.1f}", f"{plan['peak_bytes'] / peak:.3f}"])
    return rows


def k3_rows():
    folder = os.path.join(tempfile.gettempdir(), "archprobe-bench-k3")
    if not os.path.exists(os.path.join(folder, "config.json")):
        write_k3_checkpoint(folder, K3Dims(), shards=96, sparse=True)
    doc = inspect_checkpoint(folder)
    rows = []
    n_layers, heads = 93, 96
    for T in (4096, 131072, 1048576):
        m = plan_memory(doc, T)
        # the naive estimate: every parameter at 2 bytes + a full MHA KV cache (heads x 128 x 2) on every layer
        naive = doc["params"]["total"] * 2 + n_layers * 2 * heads * 128 * 2 * T
        rows.append([f"{T:,}", f"{m['weights_bytes'] / 2**30:,.1f}", f"{m['cache_by_layer_type']['mla'] / 2**30:.2f}",
                     f"{m['cache_by_layer_type']['kda'] / 2**30:.3f}", f"{m['activation_bytes'] / 2**30:.2f}",
                     f"{m['peak_bytes'] / 2**30:,.1f}", f"{naive / 2**30:,.1f}", f"{naive / m['peak_bytes']:.2f}x"])
    return rows


def main():
    print(table(accuracy_rows(), ["config", "T", "B", "cache planned", "cache measured", "ratio", "peak planned MiB",
                                  "peak measured MiB", "ratio"]))
    print()
    print(table(k3_rows(), ["K3 context", "weights GiB", "MLA cache GiB", "KDA state GiB", "activations GiB",
                            "peak GiB", "naive GiB", "naive / archprobe"]))


if __name__ == "__main__":
    main()
