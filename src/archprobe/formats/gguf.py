"""GGUF headers: metadata key/values and tensor infos, never tensor data, from a local file or from HTTP
Range reads of a hub file.

The layout (GGUF v2 and v3, little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata count;
each metadata entry a key string, a u32 value type and the value; each tensor a name, u32 n_dims, that
many u64 dims (innermost first), a u32 ggml type and a u64 offset into the data, which starts at the
next multiple of `general.alignment` (32 unless set). Strings are a u64 length and UTF-8 bytes.
The header is read front to back in doubling blocks (1 MB, 2 MB, ...), so a remote header costs a few
requests however large its tokenizer arrays are. Every count, length and offset is checked before use
(the file is hostile input). The gguf package supplies the ggml type tables; tests cross-check this
parser against its reader. Shapes are converted from GGML order to PyTorch order (outermost first).
"""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Callable

from archprobe.errors import CheckpointError, SourceError
from archprobe.formats.limits import GGUF_MAX_ARRAY as MAX_ARRAY
from archprobe.formats.limits import GGUF_MAX_DIMS as MAX_DIMS
from archprobe.formats.limits import GGUF_MAX_ELEMENTS as MAX_ELEMENTS
from archprobe.formats.limits import GGUF_MAX_HEADER_BYTES as MAX_HEADER_BYTES
from archprobe.formats.limits import GGUF_MAX_KEPT as MAX_KEPT
from archprobe.formats.limits import GGUF_MAX_KEPT_BYTES as MAX_KEPT_BYTES
from archprobe.formats.limits import GGUF_MAX_KEPT_STRING as MAX_KEPT_STRING
from archprobe.formats.limits import GGUF_MAX_META as MAX_META
from archprobe.formats.limits import GGUF_MAX_NAME as MAX_NAME
from archprobe.formats.limits import GGUF_MAX_NESTING as MAX_NESTING
from archprobe.formats.limits import GGUF_MAX_TENSORS as MAX_TENSORS
from archprobe.formats.safetensors import Header, TensorInfo

FIRST_READ = 1 << 20
MAX_BLOCK = 32 << 20         # one read; consumed bytes are dropped, so memory stays ~ one block
SPLIT_NAME = re.compile(r"^(?P<base>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")

# GGUF metadata -> the config.json keys that structure/config.py understands
_ARCH_KEYS = {
    "block_count": "num_hidden_layers", "embedding_length": "hidden_size",
    "feed_forward_length": "intermediate_size", "context_length": "max_position_embeddings",
    "attention.head_count": "num_attention_heads", "attention.head_count_kv": "num_key_value_heads",
    "expert_count": "num_experts", "expert_used_count": "num_experts_per_tok",
    "expert_shared_count": "n_shared_experts", "expert_feed_forward_length": "moe_intermediate_size",
    "attention.kv_lora_rank": "kv_lora_rank", "attention.q_lora_rank": "q_lora_rank",
    "attention.key_length": "head_dim", "attention.sliding_window": "sliding_window",
    "vocab_size": "vocab_size", "leading_dense_block_count": "first_k_dense_replace",
    "rope.dimension_count": "qk_rope_head_dim", "ssm.state_size": "ssm_state_size",
    "rope.freq_base": "rope_theta", "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "attention.layer_norm_epsilon": "layer_norm_eps",
}
# The FFN activation llama.cpp's graph hard-codes per architecture (GGUF has no key for it); validate
# (validate/load.py) applies it where a GGUF card leaves the activation unknown
GGUF_ACTIVATION = {**dict.fromkeys(("llama", "mistral", "mistral3", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "granite",
                                "granitemoe", "olmo", "olmo2", "olmoe", "phi3", "internlm2", "exaone", "smollm3",
                                "deepseek", "deepseek2", "mixtral", "minicpm", "stablelm", "cohere2"), "silu"),
               **dict.fromkeys(("gemma", "gemma2", "gemma3", "starcoder2"), "gelu_pytorch_tanh"),
               "falcon": "gelu", "gpt2": "gelu_new", "phi2": "gelu_new"}
# A GGUF tensor's dtype as every reader spells it: its ggml type name behind this prefix (GGUF_Q4_K,
# GGUF_F16), so it never reads as a safetensors dtype; the one owner of the spelling (the helpers below)
GGUF_PREFIX = "GGUF_"


def gguf_dtype(ggml_type_name: str) -> str:
    """'Q4_K' -> 'GGUF_Q4_K'."""
    return GGUF_PREFIX + ggml_type_name


def is_gguf_dtype(dtype: str) -> bool:
    return dtype.startswith(GGUF_PREFIX)


def ggml_type(dtype: str) -> str:
    """'GGUF_Q4_K' -> 'Q4_K' (a bare ggml name is returned as is)."""
    return dtype.removeprefix(GGUF_PREFIX)


DATA_OFFSETS = "gguf.data_offsets"   # Header.metadata key: tensor name -> absolute byte offset of its data
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9

Fetch = Callable[[int, int], bytes]   # (offset, length) -> the bytes there (fewer only at the end of the file)


class _Cursor:
    """A header read front to back in growing blocks; consumed bytes are dropped (memory ~ one block)."""

    def __init__(self, fetch: Fetch, size: int | None, where: str):
        self.fetch, self.size, self.where = fetch, size, where
        self.buf = bytearray()
        self.base = 0    # file offset of buf[0]
        self.pos = 0     # file offset of the next unread byte
        self.block = FIRST_READ
        self.kept = 0    # estimated bytes of Python objects kept so far (MAX_KEPT_BYTES)

    def charge(self, nbytes: int) -> None:
        """Count `nbytes` of kept Python objects against MAX_KEPT_BYTES (1-byte items become 8-40
        byte objects, so the header's byte cap alone would allow ~2 GB of lists)."""
        self.kept += nbytes
        if self.kept > MAX_KEPT_BYTES:
            raise CheckpointError(self.where, f"GGUF metadata and tensor infos would keep over "
                                              f"{MAX_KEPT_BYTES >> 20} MB of values; refused")

    def need(self, n: int) -> None:
        end = self.pos + n
        if end > MAX_HEADER_BYTES:
            raise CheckpointError(self.where, f"GGUF header runs past {MAX_HEADER_BYTES:,} bytes; refusing to read on")
        if end <= self.base + len(self.buf):
            return
        if self.pos > self.base:
            del self.buf[: self.pos - self.base]
            self.base = self.pos
        while end > self.base + len(self.buf):
            at = self.base + len(self.buf)
            want = max(self.block, end - at)
            if self.size is not None:
                want = min(want, self.size - at)
            chunk = self.fetch(at, want) if want > 0 else b""
            if not chunk:
                raise CheckpointError(self.where, f"truncated GGUF header: the file ends at {at:,} bytes")
            self.buf += chunk[:want]
            self.block = min(self.block * 2, MAX_BLOCK)

    def skip(self, n: int) -> None:
        """Move past `n` bytes without reading them when they are not buffered yet."""
        if self.pos + n > MAX_HEADER_BYTES:
            raise CheckpointError(self.where, f"GGUF header runs past {MAX_HEADER_BYTES:,} bytes; refusing to read on")
        if self.size is not None and self.pos + n > self.size:
            raise CheckpointError(self.where, f"truncated GGUF header: the file ends at {self.size:,} bytes")
        self.pos += n
        if self.pos >= self.base + len(self.buf):
            self.buf.clear()
            self.base = self.pos

    def unpack(self, fmt: str) -> tuple:
        n = struct.calcsize(fmt)
        self.need(n)
        values = struct.unpack_from(fmt, self.buf, self.pos - self.base)
        self.pos += n
        return values

    def count(self, what: str, cap: int) -> int:
        n = self.unpack("<Q")[0]
        if n > cap:
            raise CheckpointError(self.where, f"GGUF {what} is {n:,}, over the {cap:,} cap")
        return n

    def peek_length(self) -> int:
        self.need(8)
        return struct.unpack_from("<Q", self.buf, self.pos - self.base)[0]

    def string(self, keep: bool = True) -> str | int:
        """The next string, or (keep=False, or longer than MAX_KEPT_STRING) its length, skipped."""
        n = self.count("string length", MAX_HEADER_BYTES)
        if not keep or n > MAX_KEPT_STRING:
            self.skip(n)
            return n
        self.charge(64 + 4 * n)
        self.need(n)
        at = self.pos - self.base
        text = bytes(self.buf[at:at + n]).decode("utf-8", "replace")
        self.pos += n
        return text

    def name(self, what: str) -> str:
        text = self.string(self.peek_length() <= MAX_NAME)
        if not isinstance(text, str):
            raise CheckpointError(self.where, f"GGUF {what} is {text:,} bytes long (the cap is {MAX_NAME:,})")
        return text


class Skipped(int):
    """A metadata value too large to keep (an array or string): its length, walked over, not materialised."""

    def __repr__(self) -> str:
        return f"<{int(self):,} items, not kept>"


def _value(c: _Cursor, vtype: int, keep: bool, key: str, depth: int = 0):
    """One metadata value (arrays as lists); skipped, not decoded, when not kept or too large."""
    if vtype in _SCALARS:
        return c.unpack("<" + _SCALARS[vtype])[0]
    if vtype == _STRING:
        text = c.string(keep)
        return text if isinstance(text, str) else Skipped(text)
    if vtype != _ARRAY:
        raise CheckpointError(c.where, f"GGUF metadata {key[:80]!r} has unknown value type {vtype}")
    if depth >= MAX_NESTING:
        raise CheckpointError(c.where, f"GGUF metadata {key[:80]!r} nests arrays deeper than {MAX_NESTING}")
    item = c.unpack("<I")[0]
    n = c.count(f"array {key[:80]!r} length", MAX_ARRAY)
    keep = keep and n <= MAX_KEPT
    if item in _SCALARS:
        width = struct.calcsize(_SCALARS[item])
        if not keep:
            c.skip(n * width)
            return Skipped(n)
        c.charge(64 + 40 * n)
        return list(c.unpack(f"<{n}{_SCALARS[item]}"))
    if item not in (_STRING, _ARRAY):
        raise CheckpointError(c.where, f"GGUF metadata {key[:80]!r} has unknown array item type {item}")
    if not keep:
        for _ in range(n):
            _value(c, item, False, key, depth + 1)
        return Skipped(n)
    c.charge(64 + 8 * n)
    return [_value(c, item, True, key, depth + 1) for _ in range(n)]


def parse_gguf(fetch: Fetch, size: int | None, name: str, where: str) -> tuple[Header, dict]:
    """(header with tensors, metadata) of the GGUF file behind `fetch`. Tokenizer arrays are walked
    over, not kept: only `tokenizer.ggml.model` and the token count are."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    c = _Cursor(fetch, size, where)
    magic = bytes(c.unpack("<4s")[0])
    if magic != b"GGUF":
        raise CheckpointError(where, f"not a GGUF file (starts with {magic!r}, not b'GGUF')")
    version = c.unpack("<I")[0]
    if version not in (2, 3):
        hint = " (a big-endian file?)" if version >= 1 << 16 else ""
        raise CheckpointError(where, f"GGUF version {version} is not supported (2 and 3 are){hint}")
    n_tensors, n_meta = c.count("tensor count", MAX_TENSORS), c.count("metadata count", MAX_META)
    meta: dict = {}
    for _ in range(n_meta):
        key = c.name("metadata key")
        vtype = c.unpack("<I")[0]
        keep = not key.startswith("tokenizer.ggml.") or key == "tokenizer.ggml.model"
        value = _value(c, vtype, keep, key)
        if keep and not isinstance(value, Skipped):
            meta[key] = value
        elif key == "tokenizer.ggml.tokens" and isinstance(value, int) and not isinstance(value, bool):
            meta["tokenizer.ggml.tokens.count"] = int(value)
    tensors, ends, seen = [], [], set()
    for _ in range(n_tensors):
        tname = c.name("tensor name")
        shown = repr(tname) if len(tname) <= 80 else repr(tname[:77] + "...")
        if tname in seen:
            raise CheckpointError(where, f"GGUF tensor {shown} is listed twice")
        seen.add(tname)
        n_dims = c.unpack("<I")[0]
        if n_dims > MAX_DIMS:
            raise CheckpointError(where, f"GGUF tensor {shown} claims {n_dims} dimensions")
        dims = c.unpack(f"<{n_dims}Q")
        ttype, offset = c.unpack("<IQ")
        try:
            qtype = GGMLQuantizationType(ttype)
            block, type_size = GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise CheckpointError(where, f"GGUF tensor {shown} has unknown ggml type {ttype}") from None
        elements = math.prod(dims)
        if elements > MAX_ELEMENTS:
            raise CheckpointError(where, f"GGUF tensor {shown} has {elements:,} elements, over the cap")
        if elements % block:
            raise CheckpointError(where, f"GGUF tensor {shown}: {elements:,} elements is not a whole number "
                                         f"of {qtype.name} blocks of {block}")
        n_bytes = elements // block * type_size
        c.charge(320)
        tensors.append(TensorInfo(tname, gguf_dtype(qtype.name), tuple(reversed(dims)), n_bytes, name))
        ends.append((tname, offset, offset + n_bytes))
    align = meta.get("general.alignment", 32)
    if not isinstance(align, int) or isinstance(align, bool) or align < 1 or align & (align - 1) or align > 1 << 20:
        raise CheckpointError(where, f"GGUF general.alignment {align!r} is not a power of two up to 1 MiB")
    data_start = -(-c.pos // align) * align
    if size is not None:
        for tname, _, end in ends:
            if data_start + end > size:
                raise CheckpointError(where, f"GGUF tensor {tname[:80]!r} lies past the end of the file "
                                             f"({size:,} bytes)")
    header_bytes = min(data_start, size) if size is not None else data_start
    offsets = {tname: data_start + begin for tname, begin, _ in ends}
    file_bytes = size if size is not None else data_start
    return Header(name, tensors, {DATA_OFFSETS: offsets}, header_bytes, file_bytes, len(tensors)), meta


def read_gguf(path: str | os.PathLike, folder: str | None = None) -> tuple[Header, dict, dict]:
    """(header with tensors, raw metadata, config-like dict) of a local GGUF file: a regular file inside
    `folder` (default: its own folder), never a FIFO or a symlink leaving it (formats/localfiles.py)."""
    from archprobe.formats.localfiles import open_inside

    path = os.fspath(path)
    with open_inside(folder or os.path.dirname(os.path.abspath(path)), path) as f:
        size = os.fstat(f.fileno()).st_size

        def fetch(offset: int, n: int) -> bytes:
            f.seek(offset)
            return f.read(n)

        header, meta = parse_gguf(fetch, size, os.path.basename(path), path)
    return header, meta, gguf_config(meta)


def split_shard_names(name: str) -> list[str]:
    """Every shard of the split GGUF that `name` is one of (`m-00002-of-00003.gguf` -> shards 1..3 beside
    it, in order); [name] for a file that is not a split shard."""
    m = SPLIT_NAME.match(os.path.basename(name))
    if not m:
        return [name]
    folder = os.path.dirname(name)
    return [os.path.join(folder, f"{m['base']}-{i:05d}-of-{m['count']}.gguf") for i in range(1, int(m["count"]) + 1)]


def _models(names: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """GGUF file names grouped into models (split shards together, in order), and the vision projectors
    (`mmproj*`), which are not a language model's weights."""
    groups: dict[str, list[str]] = {}
    projectors = []
    for n in sorted(names):
        if os.path.basename(n).lower().startswith("mmproj"):
            projectors.append(n)
            continue
        m = SPLIT_NAME.match(n)
        groups.setdefault(m["base"] if m else n[: -len(".gguf")], []).append(n)
    return groups, projectors


def _complete(files: list[str], where: str) -> list[str]:
    """A split model's shards, checked to be all there."""
    if not all(SPLIT_NAME.match(os.path.basename(f)) for f in files):
        return files
    expected = split_shard_names(files[0])
    missing = [os.path.basename(e) for e in expected if e not in files]
    if missing:
        base = SPLIT_NAME.match(os.path.basename(files[0]))["base"]
        raise CheckpointError(f"{where}/{base}", f"split GGUF of {len(expected)} files lacks shard(s) "
                                                 f"{', '.join(missing)}")
    return files


def choose_model(names: list[str], sizes: dict[str, int | None], tag: str | None,
                 where: str) -> tuple[list[str], list[str]]:
    """(the files of one GGUF model among `names`, warnings): the model `tag` names (a case-insensitive
    part of its name), else the only one, else the largest (the closest to the original weights), the
    others listed. A tag that is a file name names that file's model. Vision projectors are listed, never
    chosen."""
    groups, projectors = _models(names)
    if not groups:
        raise SourceError(f"{where}: no GGUF model files (only vision projectors)")
    warnings = []
    if tag and tag.lower().endswith(".gguf"):   # a file name (a split part names its whole model)
        split = SPLIT_NAME.match(tag)
        tag = split["base"] if split else tag[: -len(".gguf")]
    if tag:
        hits = [k for k in groups if tag.lower() in os.path.basename(k).lower()]
        exact = [k for k in hits if os.path.basename(k).lower().endswith(tag.lower())]
        hits = exact if len(exact) == 1 else hits
        if len(hits) != 1:
            listed = ", ".join(sorted(os.path.basename(k) for k in (hits or groups)))
            raise SourceError(f"{where}: {':' + tag!r} names {'no' if not hits else len(hits)} of the GGUF "
                              f"models here ({listed})", hint="name one model: org/name:TAG, TAG a part of its name")
        pick = hits[0]
    elif len(groups) == 1:
        pick = next(iter(groups))
    else:
        total = {k: sum(sizes.get(f) or 0 for f in files) for k, files in groups.items()}
        pick = max(sorted(groups), key=lambda k: total[k])
        others = ", ".join(os.path.basename(k) for k in sorted(groups) if k != pick)
        warnings.append(f"{len(groups)} GGUF models here; inspected the largest, {os.path.basename(pick)} "
                        f"(others: {others}); choose one with org/name:TAG or a file path")
    if projectors:
        warnings.append(f"vision projector file(s) not inspected: {', '.join(projectors)}")
    return _complete(groups[pick], where), warnings


def gguf_config(meta: dict) -> dict:
    """A config.json-like dict from GGUF metadata (per-layer arrays kept as lists)."""
    arch = meta.get("general.architecture") or "unknown"
    cfg: dict = {"model_type": arch, "architectures": [f"gguf:{arch}"], "gguf_architecture": arch}
    prefix = arch + "."
    for key, value in meta.items():
        if key.startswith(prefix):
            sub = key[len(prefix):]
            if sub in _ARCH_KEYS:
                cfg[_ARCH_KEYS[sub]] = value
    if "vocab_size" not in cfg and "tokenizer.ggml.tokens.count" in meta:
        cfg["vocab_size"] = meta["tokenizer.ggml.tokens.count"]
    return cfg
