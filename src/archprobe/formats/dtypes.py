"""The safetensors dtypes: bits per stored element, which are FP8, and the torch dtype each loads as.
The one owner of these tables (formats/quant.py, diff/, memory/ and validate/lazy_io.py read them; no torch here).

New dtypes appear every year (F8_E8M0, F4...): an unknown one is reported and counted, not a crash.
"""

DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}

FLOATS: frozenset[str] = frozenset({"F64", "F32", "F16", "BF16"})      # plain floating point: stored as is
INTEGERS: frozenset[str] = frozenset({"I64", "I32", "I16", "I8"})
SCALE_ONLY: frozenset[str] = frozenset({"F8_E8M0", "E8M0", "UE8"})   # exponent-only: block scales, never weights

FP8: frozenset[str] = frozenset({"F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"})   # dequantized on load

# the storage dtypes read as torch tensors directly, by torch's attribute name
TORCH_NAMES: dict[str, str] = {
    "BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64", "U8": "uint8", "I8": "int8",
    "I16": "int16", "I32": "int32", "I64": "int64", "BOOL": "bool",
}
