"""The functional core (spec/ops.md): pure tensor functions, no parameters, no state.

Every op has a reference form (the plainest correct code) and, where speed matters, a fast form
with the same signature; the package exports the recommended entry points. Needs torch.
"""

from archprobe.ops.attnres import attn_res_mix
from archprobe.ops.kda import kda_chunked, kda_recurrent
from archprobe.ops.moe import moe_dispatch, moe_route
from archprobe.ops.quant import dequantize_fp8_block, dequantize_mxfp4
from archprobe.ops.situ import situ_glu
from archprobe.ops.ssd import ssd_chunked, ssd_recurrent

__all__ = ["attn_res_mix", "dequantize_fp8_block", "dequantize_mxfp4", "kda_chunked", "kda_recurrent",
           "moe_dispatch", "moe_route", "situ_glu", "ssd_chunked", "ssd_recurrent"]
