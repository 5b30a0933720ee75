"""Checkpoint file formats, read from headers only (standard library + numpy, never torch)."""

from archprobe.formats.dtypes import DTYPE_BITS
from archprobe.formats.safetensors import MAX_HEADER_BYTES, TensorInfo, parse_header, read_header

__all__ = ["DTYPE_BITS", "MAX_HEADER_BYTES", "TensorInfo", "parse_header", "read_header"]
