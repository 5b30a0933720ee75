"""safetensors header reader: 8-byte little-endian length, then a JSON header; never the tensor data.

Every header is hostile input. `parse_header` checks what the format promises (a JSON object, each
entry a dtype, a shape of non-negative ints and `data_offsets` inside the data region, sizes that
match dtype x shape, no two tensors overlapping) and raises one `CheckpointError` naming the file.
An unknown dtype is not an error: the tensor is kept and reported upstream.

Speed matters: K3 has 497,220 tensors in 76 MB of headers. The loop below does the minimum per
entry, and the per-expert enumerations (`...experts.17.w1.weight`) are folded into one entry per
(layer, family, dtype, shape) with a count, which keeps everything a parameter count or a
structure detector needs while the rest of archprobe handles thousands of entries, not 500k.
"""

from __future__ import annotations

import gc
import heapq
import math
import operator
import os
import struct
from array import array
from contextlib import contextmanager
from itertools import islice

from archprobe.errors import CheckpointError
from archprobe.formats.dtypes import DTYPE_BITS
from archprobe.formats.headerstream import StreamedEntries
from archprobe.formats.limits import _DEFAULTS, cap
from archprobe.formats.limits import SAFETENSORS_MAX_DIMS as MAX_DIMS
from archprobe.formats.limits import SAFETENSORS_MAX_ELEMENTS as MAX_ELEMENTS

try:  # orjson parses the K3 headers ~2x faster than json; the result is the same
    from orjson import JSONDecodeError as _JSONError
    from orjson import loads as _json_loads
except ImportError:  # pragma: no cover - orjson is a dependency, json is the fallback
    from json import JSONDecodeError as _JSONError
    from json import loads as _json_loads

# The hub refuses headers over 25 MB for its metadata API; real sharded checkpoints stay far below.
# We accept up to 100 MB (one unsharded 500k-tensor file) and refuse anything larger before reading it
# (ARCHPROBE_MAX_HEADER_BYTES changes it; formats/limits.py lists every cap).
MAX_HEADER_BYTES = int(_DEFAULTS["MAX_HEADER_BYTES"])
WHOLE_PARSE_BYTES = 1 << 20  # larger headers are parsed entry by entry (formats/headerstream.py)
EXPERT_MARK = ".experts."


class TensorInfo:
    """`count` tensors that share dtype and shape; `name` has `*` for a folded expert index.

    `nbytes` is the size of one of them; `file` is the shard's name inside the checkpoint.
    Expert indices of 10 digits or more are not folded (each such name stays its own entry).
    """

    __slots__ = ("name", "dtype", "shape", "nbytes", "file", "count", "top", "first")

    def __init__(self, name: str, dtype: str, shape: tuple[int, ...], nbytes: int, file: str, count: int = 1,
                 top: int = -1, first: str | None = None):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.nbytes = nbytes
        self.file = file
        self.count = count
        self.top = top   # folded entries: the largest expert index seen (a duplicate check across shards)
        self.first = first      # a folded family's first real name (to unfold a family of one)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        n = f" x{self.count}" if self.count > 1 else ""
        return f"TensorInfo({self.name!r}, {self.dtype}, {list(self.shape)}{n}, {self.file!r})"

    def __reduce__(self):  # compact pickling between worker processes
        return (TensorInfo, (self.name, self.dtype, self.shape, self.nbytes, self.file, self.count, self.top,
                             self.first))


class Header:
    """A parsed header: (folded) tensors, the free-form `__metadata__`, the bytes read and counted."""

    __slots__ = ("file", "tensors", "metadata", "header_bytes", "file_bytes", "num_tensors")

    def __init__(self, file: str, tensors: list[TensorInfo], metadata: dict, header_bytes: int,
                 file_bytes: int, num_tensors: int):
        self.file = file
        self.tensors = tensors
        self.metadata = metadata
        self.header_bytes = header_bytes
        self.file_bytes = file_bytes
        self.num_tensors = num_tensors

    def __reduce__(self):
        return (Header, (self.file, self.tensors, self.metadata, self.header_bytes, self.file_bytes,
                         self.num_tensors))


@contextmanager
def _no_gc():
    """Building millions of small containers triggers the cyclic GC over and over (2-3x slower)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def header_length(prefix: bytes, path: str, file_bytes: int | None) -> int:
    """The JSON length from the first 8 bytes, checked against the cap and the file size."""
    if len(prefix) < 8:
        raise CheckpointError(path, f"truncated: {len(prefix)} bytes, a safetensors file starts with 8")
    (n,) = struct.unpack("<Q", prefix[:8])
    limit = cap("MAX_HEADER_BYTES")
    if n > limit:
        raise CheckpointError(path, f"header length {n:,} bytes is over the {limit:,}-byte cap")
    if file_bytes is not None and 8 + n > file_bytes:
        raise CheckpointError(path, f"header length {n:,} bytes is larger than the file ({file_bytes:,} bytes)")
    if n < 2:
        raise CheckpointError(path, f"header length {n} is too small for a JSON object")
    return n


def short_repr(value) -> str:
    """repr() of a hostile value, cut short (an error message must stay one readable line)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _entry_problem(tname: str, entry, data_bytes: int | None) -> str | None:
    """The precise complaint about one entry (the slow path, run only once something is wrong)."""
    if not isinstance(entry, dict):
        return f"tensor {short_repr(tname)}: entry is not a JSON object"
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str):
        return f"tensor {short_repr(tname)}: dtype {short_repr(dtype)} is not a string"
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        return f"tensor {short_repr(tname)}: shape {short_repr(shape)} is not a list of non-negative integers"
    if len(shape) > MAX_DIMS:
        return f"tensor {short_repr(tname)}: shape has {len(shape)} dimensions, over the cap of {MAX_DIMS}"
    if math.prod(shape) > MAX_ELEMENTS:
        return f"tensor {short_repr(tname)}: shape {short_repr(shape)} has over {MAX_ELEMENTS:,} elements"
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)):
        return f"tensor {short_repr(tname)}: data_offsets {short_repr(offsets)} is not two integers"
    begin, end = offsets
    if not 0 <= begin <= end or end > (data_bytes if data_bytes is not None else 1 << 62):
        where = "" if data_bytes is None else f" of {data_bytes:,} bytes"
        return f"tensor {short_repr(tname)}: data_offsets [{begin}, {end}] outside the data region{where}"
    bits = DTYPE_BITS.get(dtype)
    if bits is not None and math.prod(shape) * bits != (end - begin) * 8:
        return (f"tensor {short_repr(tname)}: {short_repr(dtype)}{shape} needs {math.prod(shape) * bits // 8:,} bytes, "
                f"data_offsets give {end - begin:,}")
    return None


def parse_header(raw: bytes, path: str, file_bytes: int | None = None) -> Header:
    """Parse and check the JSON header `raw` (without the 8-byte prefix) of the file `path`.

    `file_bytes` is the whole file's size; when known, offsets are checked against the data region.
    A header over WHOLE_PARSE_BYTES is walked entry by entry (formats/headerstream.py), so its parse
    costs about its own bytes plus the kept records, not the 10-30x of a whole-document parse.
    """
    name = os.path.basename(path)
    data_bytes = None if file_bytes is None else file_bytes - 8 - len(raw)
    with _no_gc():
        streamed = len(raw) > WHOLE_PARSE_BYTES
        if streamed:
            stream = StreamedEntries(raw, path, _json_loads, (_JSONError, UnicodeDecodeError, ValueError))
            pairs = stream.__iter__
        else:
            doc, metadata = _whole(raw, path)
            pairs = doc.items
        try:
            tensors, spans, count = _fast_entries(pairs(), name, data_bytes)
        except (TypeError, KeyError, ValueError, AttributeError):
            tensors = None
        if tensors is None:  # find and name the offending entry
            for tname, entry in pairs():
                problem = _entry_problem(tname, entry, data_bytes)
                if problem:
                    raise CheckpointError(path, problem)
            raise CheckpointError(path, "malformed header")  # pragma: no cover - the loop names it
        if streamed:
            _check_unique(tensors, path)
            metadata = stream.metadata
        begin = _overlapping(spans)
        if begin is not None:
            raise CheckpointError(path, _overlap_message(pairs(), begin))
    return Header(name, tensors, metadata, 8 + len(raw), file_bytes if file_bytes is not None else -1, count)


def _whole(raw: bytes, path: str) -> tuple[dict, dict]:
    """A small header parsed whole (the fast path: K3's shard headers are under 1 MB each)."""
    try:
        doc = _json_loads(raw)
    except (_JSONError, UnicodeDecodeError, ValueError) as exc:
        msg = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise CheckpointError(path, f"header is not valid JSON ({msg})") from None
    if not isinstance(doc, dict):
        raise CheckpointError(path, f"header is a JSON {type(doc).__name__}, not an object")
    meta = doc.pop("__metadata__", None) or {}
    if not isinstance(meta, dict):
        raise CheckpointError(path, "__metadata__ is not a JSON object")
    return doc, meta


def _check_unique(tensors: list[TensorInfo], path: str) -> None:
    """A streamed header has no dict to merge a repeated name: a name given twice is refused (a folded
    family's repeats are caught by its count against its largest index, formats/checkpoint.Distinct)."""
    names = [t.name for t in tensors if t.top < 0]
    if len(set(names)) != len(names):
        seen: set = set()
        for n in names:
            if n in seen:
                raise CheckpointError(path, f"tensor {short_repr(n)} appears twice in the header")
            seen.add(n)


def _fast_entries(pairs, file: str, data_bytes: int | None):
    """The hot loop: validate every entry and fold expert enumerations. Returns None on any problem.

    Also returns the (begins, ends) of the non-empty tensors for the overlap check (`_overlapping`),
    as 8-byte arrays (a list of ints costs 40 bytes an entry), and the number of entries."""
    prod = math.prod
    bits_of = DTYPE_BITS.get
    limit = data_bytes if data_bytes is not None else (1 << 62)
    max_records = cap("MAX_TENSOR_ENTRIES")
    tensors: list[TensorInfo] = []
    folded: dict = {}   # (head, rest) -> (info, dtype, shape list); a differing dtype/shape gets its own key
    begins, ends = array("q"), array("q")
    add_begin, add_end = begins.append, ends.append
    count = 0
    for count, (tname, entry) in enumerate(pairs, 1):  # noqa: B007 - count is the number of entries
        dtype = entry["dtype"]
        shape = entry["shape"]
        begin, end = entry["data_offsets"]
        if type(begin) is not int or type(end) is not int or not 0 <= begin <= end <= limit:
            return None, None
        size = end - begin
        if size:
            add_begin(begin)
            add_end(end)
        head = None
        if EXPERT_MARK in tname:       # the common spelling, checked first: K3 has 494k of these
            head, _, tail = tname.rpartition(EXPERT_MARK)
            head += EXPERT_MARK[:-1]
            idx, dot, rest = tail.partition(".")
            if not (dot and idx.isdigit() and len(idx) < 10):
                head = None
        elif tname.count(".") >= 4:    # any other enumeration inside an enumerated layer, whatever it is called
            parts = tname.split(".")
            digits = [i for i, p in enumerate(parts[:-1]) if p.isdigit() and len(p) < 10]
            if len(digits) >= 2:
                k = digits[-1]
                head, idx, rest = ".".join(parts[:k]), parts[k], ".".join(parts[k + 1:])
        if head is not None:
            got = folded.get((head, rest))
            # the common case: the dtype and shape of an already validated member of this family, so only
            # the byte count needs checking (an equal list of equal numbers is that validated shape)
            if got is not None and got[1] == dtype and got[2] == shape:
                info = got[0]
                if size != info.nbytes:
                    return None, None
                info.count += 1
                i = int(idx)
                if i > info.top:
                    info.top = i
                continue
        # parse before multiplying: sum() raises on a list/str/None element before prod() could
        # repeat a sequence (`[300000000, [0]]` would build a 2.4 GB list), and the rank is capped
        # so a product of huge ints stays cheap
        if type(shape) is not list or len(shape) > MAX_DIMS:
            return None, None
        sum(shape)
        n = prod(shape)
        if (type(n) is not int or n < 0 or n > MAX_ELEMENTS or type(dtype) is not str
                or (len(shape) > 1 and min(shape) < 0) or not all(type(d) is int for d in shape)):
            return None, None
        bits = bits_of(dtype)
        if bits is not None and n * bits != size * 8:
            return None, None
        if head is not None:
            key = (head, rest, dtype, tuple(shape))
            got = folded.get(key)
            if got is None:
                info = TensorInfo(f"{head}.*.{rest}", dtype, key[3], size, file, 0, -1, tname)
                tensors.append(info)
                got = folded[key] = (info, dtype, shape)
                folded.setdefault((head, rest), got)
            info = got[0]
            if size != info.nbytes:
                return None, None
            info.count += 1
            i = int(idx)
            if i > info.top:
                info.top = i
            continue
        tensors.append(TensorInfo(tname, dtype, tuple(shape), size, file))
        if len(tensors) > max_records:
            raise CheckpointError(file, f"over {max_records:,} tensor entries (after folding expert "
                                        "enumerations) in one header; refused (ARCHPROBE_MAX_TENSOR_ENTRIES)")
    for info, _, _ in folded.values():        # a "family" of one is just a tensor: keep its real name
        if info.count == 1:
            info.name, info.top = info.first, -1
    return tensors, (begins, ends), count


def _overlapping(spans: tuple[array, array]) -> int | None:
    """A begin that falls inside another tensor's bytes, or None. Half-open spans [b, e) overlap nowhere
    iff, with begins and ends each sorted, every next begin is >= the previous end (at any point x the
    spans covering x number #{b <= x} - #{e <= x}). Writers list tensors in offset order, so the spans
    usually pass in file order; otherwise both are sorted in runs and merged (_sorted_stream), so no
    list of 40-byte ints for every entry is ever built."""
    begins, ends = spans
    if len(begins) < 2:
        return None
    if not any(map(operator.lt, islice(begins, 1, None), ends)):   # in file order: each next begin >= end
        return None
    pairs = zip(islice(_sorted_stream(begins), 1, None), _sorted_stream(ends), strict=False)
    return next((b for b, e in pairs if b < e), None)


_RUN = 1 << 18


def _sorted_stream(values: array):
    """The values in order: runs of _RUN sorted in place (one run's list alive at a time), then merged."""
    for i in range(0, len(values), _RUN):
        values[i:i + _RUN] = array("q", sorted(values[i:i + _RUN]))
    return heapq.merge(*(islice(values, i, i + _RUN) for i in range(0, len(values), _RUN)))


def _overlap_message(pairs, begin: int) -> str:
    names = sorted((e["data_offsets"][0], n) for n, e in pairs)
    prev = None
    for b, n in names:
        if b >= begin and prev is not None:
            return f"tensors {short_repr(prev)} and {short_repr(n)} overlap (data_offsets)"
        prev = n
    return "two tensors overlap (data_offsets)"


def read_header(path: str | os.PathLike, folder: str | None = None) -> Header:
    """Read and check the header of a local .safetensors file (reads 8 + header bytes, nothing more).

    Only a regular file inside `folder` (default: the file's own folder) is opened (formats/localfiles.py).
    """
    path = os.fspath(path)
    raw, size = read_header_bytes(path, folder or os.path.dirname(os.path.abspath(path)))
    return parse_header(raw, path, size)


def read_header_bytes(path: str, folder: str) -> tuple[bytes, int]:
    """The raw JSON header of a local .safetensors file and the file's size, read from a regular file
    inside `folder` (8 + header bytes, nothing more); the length prefix is checked, not the JSON."""
    from archprobe.formats.localfiles import open_inside

    try:
        with open_inside(folder, path) as f:
            size = os.fstat(f.fileno()).st_size
            n = header_length(f.read(8), path, size)
            raw = f.read(n)
    except OSError as exc:
        raise CheckpointError(path, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) != n:
        raise CheckpointError(path, f"truncated: header needs {n:,} bytes, file has {len(raw):,}")
    return raw, size
