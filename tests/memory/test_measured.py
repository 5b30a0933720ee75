"""Measured, not only computed: the planner against real runs of our reference decoder on CPU.

Each configuration is saved as a checkpoint and inspected (the same path a user's model takes), then
planned with engine="reference" (fp32). A fresh process runs the prefill and reports the exact bytes of
its caches and its peak RSS growth; the framework's own first-forward footprint (a 1-token run) is
measured separately and taken out, since the planner lists it as excluded. Caches must agree within 1%,
peaks within 10%.
"""

from __future__ import annotations

import pytest

from archprobe.nn.decoder import HybridConfig
from archprobe.nn.presets import tiny_k3, tiny_nemotron_latent, variant
from tests.support.decoder_ckpt import planned_vs_measured

WIDE = dict(vocab_size=32000, hidden_size=256)
CONFIGS = {
    "gqa": (HybridConfig(**WIDE, num_hidden_layers=4, intermediate_size=512,
                         mixer_args={"gqa": dict(num_heads=8, num_kv_heads=2, head_dim=32)}), [(256, 2), (1536, 1)]),
    "mla": (HybridConfig(**WIDE, num_hidden_layers=3, mixer_types=("mla",) * 3,
                         mixer_args={"mla": dict(q_lora_rank=64, kv_lora_rank=32)}), [(1024, 1)]),
    "kda": (HybridConfig(**WIDE, num_hidden_layers=3, mixer_types=("kda",) * 3), [(2048, 1)]),
    "hybrid_k3": (tiny_k3(**WIDE, num_hidden_layers=8), [(256, 2), (2048, 1)]),
    "latent_moe": (tiny_nemotron_latent(**WIDE), [(1024, 1)]),
    "attnres": (variant("attnres_block", **WIDE), [(1024, 1)]),
    "sliding_window": (HybridConfig(**WIDE, num_hidden_layers=2, mixer_types=("swa", "gqa"),
                                    mixer_args={"gqa": dict(sliding_window=128)}), [(1024, 1)]),
    "lowrank_kv": (variant("kv_compression", **WIDE), [(1024, 2)]),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_planner_matches_a_real_run(name, tmp_path):
    cfg, runs = CONFIGS[name]
    for row in planned_vs_measured(cfg, runs, tmp_path):
        plan, got = row["plan"], row["got"]
        assert plan["weights_bytes"] == got["weights"]
        assert abs(plan["cache_bytes"] - got["cache"]) <= 0.01 * got["cache"], (plan["cache_by_layer_type"], got)
        ratio = plan["peak_bytes"] / row["measured_peak"]
        assert 0.9 <= ratio <= 1.1, (f"{name} T={row['context']} B={row['batch']}: planned {plan['peak_bytes']:,} "
                                     f"vs measured {row['measured_peak']:,} (framework {row['framework']:,}) "
                                     f"ratio {ratio:.3f}")
