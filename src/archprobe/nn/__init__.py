"""Reference modules whose parameters carry checkpoint names (q_a_proj, kv_a_proj_with_mqa, f_a_proj,
routed_expert_down_proj, self_attention_res_proj, ...), assembled into a configurable hybrid decoder.
Needs torch; never imports FLA/Triton."""

from archprobe.nn.decoder import HybridConfig, HybridDecoder

__all__ = ["HybridConfig", "HybridDecoder"]
