"""Kimi Delta Attention: the token-by-token recurrence (the definition) and the chunked algorithm."""

from archprobe.ops.kda.chunked import kda_chunked
from archprobe.ops.kda.naive import kda_recurrent

__all__ = ["kda_chunked", "kda_recurrent"]
