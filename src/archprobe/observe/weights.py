"""observe --weights-only: an integrity scan of every stored tensor, read one tensor at a time.

Per tensor: rms and max |x| over the finite values, NaN/Inf count, all-zero, and a content hash. Then,
across the checkpoint: groups of bit-identical tensors (and of bit-identical experts inside a fused
[E, ...] expert tensor), and outliers against siblings. A NaN check misses a corrupt but finite value
(OPT-175B shipped values of 4.5e3-5e4 among weights of ~0.02, metaseq#122); comparing a tensor with
the same tensor in its sibling layers / experts catches it: siblings are the names equal up to their
numeric indices, and a tensor is an outlier when its max |x| exceeds OUTLIER_FACTOR times the median
max |x| of its siblings. Constant tensors (norm gains of ones, zero biases) are never duplicates: every
freshly initialised model has them. MXFP4 (E8M0 byte) and FP8 (float) scales get exponent histograms.
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
from contextlib import contextmanager
from dataclasses import dataclass

import torch

OUTLIER_FACTOR = 50.0    # max |x| over the siblings' median max |x| that makes a tensor an outlier
MIN_SIBLINGS = 2         # siblings (other than the tensor itself) needed for a median to mean something
WITHIN_FACTOR = 1000.0   # without siblings: max |x| over the tensor's own median |x| that makes an outlier
MEDIAN_SAMPLE = 1 << 14  # values the median |x| is estimated from
CHUNK = 1 << 22          # elements converted to float32 at a time: a huge embedding never doubles in RAM
_INDEX = re.compile(r"(?<=\.)\d+(?=\.)|(?<=\.)\d+$")


@dataclass
class TensorStats:
    name: str
    shape: tuple
    dtype: str
    numel: int
    rms: float | None          # None: not a float tensor (packed bytes, integer ids)
    max_abs: float | None
    nonfinite: int
    all_zero: bool
    constant: bool
    digest: str
    expert_digests: list[str] | None = None   # per slice of a fused [E, ...] expert tensor
    median_abs: float | None = None


def sibling_key(name: str) -> str:
    """The name with its numeric indices replaced: layers.3.mlp.experts.7.w1 -> layers.#.mlp.experts.#.w1."""
    return _INDEX.sub("#", name)


def _hasher(t: torch.Tensor):
    h = hashlib.blake2b(digest_size=16)
    h.update((b"float" if t.dtype.is_floating_point else str(t.dtype).encode()) + str(tuple(t.shape)).encode())
    return h


def _feed(h, c: torch.Tensor) -> None:
    """Hash a chunk: float32 values for a float chunk already converted, raw bytes otherwise."""
    raw = c.contiguous().view(torch.uint8) if c.dtype != torch.bool else c.to(torch.uint8)
    h.update(raw.numpy().data)


def _digest(t: torch.Tensor) -> str:
    """A content hash: of the float32 values for a floating tensor (exact for every narrower float, so an
    expert stored again in another float dtype still matches), of the raw bytes and dtype otherwise."""
    h = _hasher(t)
    flat = t.reshape(-1)
    for s in range(0, flat.numel(), CHUNK):
        c = flat[s:s + CHUNK]
        _feed(h, c.to(torch.float32) if t.dtype.is_floating_point else c)
    return h.hexdigest()


def _sample(flat: torch.Tensor) -> torch.Tensor:
    """An even stride of at most about MEDIAN_SAMPLE values, as float32."""
    return flat[::max(1, flat.numel() // MEDIAN_SAMPLE)].float()


def _fingerprint(t: torch.Tensor, sq: float, lo: float, hi: float, bad: int) -> str:
    """A cheap stand-in for a float tensor's digest: shape, sum of squares, range, NaN/Inf count and a
    strided sample of the values. Equal contents give equal fingerprints; only tensors whose fingerprints
    collide are hashed in full (`_confirm`), so a clean checkpoint is never hashed byte by byte."""
    h = _hasher(t)
    h.update(repr((sq, lo, hi, bad)).encode())
    _feed(h, _sample(t.reshape(-1)))
    return "f" + h.hexdigest()


def _slice_fingerprint(t: torch.Tensor) -> str:
    f = t.float()
    a, b = torch.aminmax(f) if f.numel() else (torch.tensor(0.0), torch.tensor(0.0))
    return _fingerprint(t, float(torch.linalg.vector_norm(f)), float(a), float(b), 0)


def _median_abs(flat: torch.Tensor, finite: bool) -> float | None:
    """The median |x| of the finite values, from an even stride of at most MEDIAN_SAMPLE of them (the
    finiteness mask, slow on large samples, only where the tensor holds NaN/Inf)."""
    f = _sample(flat).abs()
    if not finite:
        f = f[torch.isfinite(f)]
    return float(f.median()) if f.numel() else None


def tensor_stats(name: str, t: torch.Tensor, fused_experts: bool = False) -> TensorStats:
    """One pass over `t` in chunks: float stats for floating dtypes, zero / constant / hash for all."""
    flat = t.reshape(-1)
    is_float = t.dtype.is_floating_point
    h = _hasher(t)
    sq, mx, bad, lo, hi = 0.0, 0.0, 0, math.inf, -math.inf
    finite_n = 0
    for s in range(0, flat.numel(), CHUNK):
        c = flat[s:s + CHUNK]
        f = c.float() if is_float else c.to(torch.float64)
        if not is_float:
            _feed(h, c)         # float tensors get a fingerprint instead (below)
        a, b = torch.aminmax(f)
        if is_float and not (math.isfinite(float(a)) and math.isfinite(float(b))):   # NaN / Inf: slow path
            fin = torch.isfinite(f)
            bad += c.numel() - int(fin.sum())
            f = f[fin]
            if not f.numel():
                continue
            a, b = torch.aminmax(f)
        lo, hi = min(lo, float(a)), max(hi, float(b))
        if is_float:
            sq += float(torch.linalg.vector_norm(f)) ** 2
            mx = max(mx, abs(lo), abs(hi))
            finite_n += f.numel()
    nonzero = not (lo == hi == 0.0) and finite_n + (0 if is_float else flat.numel()) > 0
    varies = lo != hi or bad > 0
    rms = math.sqrt(sq / finite_n) if is_float and finite_n else (0.0 if is_float else None)
    experts = None
    if fused_experts and t.dim() >= 3 and t.shape[0] > 1:
        experts = [_slice_fingerprint(t[e]) if is_float else _digest(t[e]) for e in range(t.shape[0])]
    digest = _fingerprint(t, sq, lo, hi, bad) if is_float else h.hexdigest()
    return TensorStats(name, tuple(t.shape), str(t.dtype).removeprefix("torch."), flat.numel(), rms,
                       mx if is_float else None, bad, not nonzero, not varies, digest, experts,
                       _median_abs(flat, bad == 0) if is_float and flat.numel() else None)


def expand_names(reader) -> list[str]:
    """Every stored tensor's checkpoint name (folded expert families unfolded), in header order."""
    names = []
    for listed in reader.files:
        if "*" in listed:
            names += [listed.replace("*", str(i), 1) for i in range(reader.counts[listed])]
        else:
            names.append(listed)
    return names


def _is_fused_experts(name: str) -> bool:
    return ("expert" in name or "_exps" in name) and "shared" not in name


def _scale_kind(name: str, t: torch.Tensor) -> str | None:
    low = name.lower()
    if not re.search(r"scale", low):
        return None
    if t.dtype == torch.uint8:
        return "mxfp4_e8m0"       # one exponent byte per 32-value block: 2^(v - 127), 255 = NaN
    if t.dtype.is_floating_point and ("weight_scale" in low or low.endswith("scale_inv")):
        return "fp8_scale"
    return None


def _histogram(kind: str, t: torch.Tensor) -> dict[int, int]:
    if kind == "mxfp4_e8m0":
        v = t.reshape(-1).to(torch.int64) - 127
        v = torch.where(v == 128, torch.full_like(v, 999), v)   # 255: the format's NaN, kept apart
    else:
        f = t.reshape(-1).float().abs()
        f = f[torch.isfinite(f) & (f > 0)]
        v = torch.floor(torch.log2(f)).to(torch.int64)
    vals, counts = torch.unique(v, return_counts=True)
    return {int(a): int(b) for a, b in zip(vals.tolist(), counts.tolist(), strict=True)}


def find_outliers(stats: list[TensorStats]) -> dict[str, dict]:
    """name -> {max_abs, sibling_max_abs, siblings}: tensors whose max |x| stands out from their siblings'."""
    groups: dict[str, list[TensorStats]] = {}
    for s in stats:
        if s.max_abs is not None and s.numel > 1:
            groups.setdefault(sibling_key(s.name), []).append(s)
    found = {}
    for members in groups.values():
        if len(members) <= MIN_SIBLINGS:      # too few siblings: the tensor against its own typical value
            for s in members:
                if s.median_abs and s.max_abs > WITHIN_FACTOR * s.median_abs:
                    found[s.name] = {"max_abs": s.max_abs, "sibling_max_abs": s.median_abs, "siblings": 0,
                                     "against": "median_abs", "threshold": WITHIN_FACTOR * s.median_abs}
            continue
        for s in members:
            others = [o.max_abs for o in members if o is not s]
            ref = statistics.median(others)
            if s.max_abs > OUTLIER_FACTOR * ref and s.max_abs > 0:
                found[s.name] = {"max_abs": s.max_abs, "sibling_max_abs": ref, "siblings": len(others),
                                 "against": "siblings", "threshold": OUTLIER_FACTOR * ref}
    return found


def duplicate_groups(stats: list[TensorStats], tied: bool) -> list[list[str]]:
    """Groups of bit-identical tensors (and of identical experts inside fused expert tensors, named
    `tensor[e]`); constant tensors are left out, and an embedding stored again as a tied head is expected."""
    by_digest: dict[str, list[str]] = {}
    for s in stats:
        if s.constant or s.numel < 2:
            continue
        by_digest.setdefault(s.digest, []).append(s.name)
        if s.expert_digests:
            for e, d in enumerate(s.expert_digests):
                by_digest.setdefault("e" + d, []).append(f"{s.name}[{e}]")
    groups = [g for g in by_digest.values() if len(g) > 1]
    if tied:
        groups = [g for g in groups if not all(re.search(r"embed|lm_head|wte|\boutput\b", n) for n in g)]
    return sorted(groups)


_LAYER = re.compile(r"(?<=\.)\d+(?=\.)")
_EXPERT = re.compile(r"(?<=expert\.)\d+(?=\.)|(?<=experts\.)\d+(?=\.)")


def _units(stats: list[TensorStats], split) -> dict[tuple, dict[str, str]]:
    """unit -> {name with the unit's index replaced: digest}, for the tensors `split(name)` places in a
    unit (a layer, an expert); constant tensors are left out, as for duplicates."""
    units: dict[tuple, dict[str, str]] = {}
    for s in stats:
        if s.constant or s.numel < 2:
            continue
        pieces = [(s.name, s.digest)]
        if s.expert_digests:
            pieces += [(f"{s.name}[{e}]", d) for e, d in enumerate(s.expert_digests)]
        for name, digest in pieces:
            placed = split(name)
            if placed is not None:
                unit, key = placed
                units.setdefault(unit, {})[key] = digest
    return units


def _copies(units: dict[tuple, dict[str, str]]) -> list[tuple[tuple, tuple, int]]:
    """(unit, the earlier unit it copies, tensors) for units whose every tensor equals an earlier unit's
    (same group, same keys, same contents)."""
    found = []
    for u in sorted(units):
        for c in sorted(units):
            if c >= u:
                break
            if c[:-1] == u[:-1] and units[c] == units[u]:
                found.append((u, c, len(units[u])))
                break
    return found


def _layer_split(name: str):
    m = _LAYER.search(name)
    return None if m is None else ((int(m.group()),), name[:m.start()] + "#" + name[m.end():])


def _expert_split(name: str):
    fused = re.search(r"\[(\d+)\]$", name)
    m = _EXPERT.search(name)
    if fused:
        base, e = name[:fused.start()], int(fused.group(1))
        key = base
    elif m:
        base, e = name, int(m.group())
        key = name[:m.start()] + "#" + name[m.end():]
    else:
        return None
    layer = _LAYER.search(base)
    return (int(layer.group()) if layer else -1, e), key


def duplicate_units(stats: list[TensorStats]) -> tuple[list[dict], list[dict]]:
    """Whole layers stored twice and whole experts stored twice (every tensor of the unit bit-identical
    to the same tensor of an earlier one): (duplicate_layers, duplicate_experts)."""
    layers = [{"layer": u[0], "copy_of": c[0], "tensors": n} for u, c, n in _copies(_units(stats, _layer_split))]
    experts = [{"layer": u[0], "expert": u[1], "copy_of": c[1], "tensors": n}
               for u, c, n in _copies(_units(stats, _expert_split))]
    return layers, experts


def outlier_share(t: torch.Tensor, threshold: float) -> float:
    flat = t.reshape(-1)
    n = sum(int((flat[s:s + CHUNK].float().abs() > threshold).sum()) for s in range(0, flat.numel(), CHUNK))
    return n / max(1, flat.numel())


SESSION_BYTES = 256 << 20   # shards are reopened after this much data: mapped pages read so far are let go


def _sessions(reader, names):
    """(get, name) for each name, in reader sessions of at most SESSION_BYTES of tensor data each, so the
    memory-mapped pages a full scan touches never all count as resident at once."""
    names = iter(names)
    pending = next(names, None)
    while pending is not None:
        read = 0
        with reader.session() as get:
            while pending is not None and read < SESSION_BYTES:
                shape = reader.shape(pending) or ()
                read += math.prod(shape) * 4
                yield get, pending
                pending = next(names, None)


class Scan:
    """The weights scan, fed tensor by tensor: `watching(reader)` is the reader with every tensor the
    forward reads scanned as it is read (each stored tensor is read from disk once for both), and
    `finish()` scans the tensors the forward never read and assembles the section."""

    def __init__(self, reader, config: dict | None = None):
        self.reader, self.config = reader, config or {}
        self.stats: dict[str, TensorStats] = {}
        self.scales: dict[str, dict] = {}
        self.during_forward = 0

    def see(self, name: str, t: torch.Tensor) -> None:
        if "*" in name:       # a family the reader stacked: its members, under their own names
            for e in range(t.shape[0]):
                self.see(name.replace("*", str(e), 1), t[e])
            return
        if name in self.stats:
            return
        self.stats[name] = tensor_stats(name, t, _is_fused_experts(name))
        kind = _scale_kind(name, t)
        if kind:
            entry = self.scales.setdefault(kind, {"kind": kind, "tensors": 0, "histogram": {}})
            entry["tensors"] += 1
            for k, v in _histogram(kind, t).items():
                entry["histogram"][k] = entry["histogram"].get(k, 0) + v

    def watching(self, reader):
        return _Watched(reader, self)

    def finish(self, progress=None) -> dict:
        names = expand_names(self.reader)
        self.during_forward = sum(n in self.stats for n in names)
        rest = [n for n in names if n not in self.stats]
        for get, name in _sessions(self.reader, progress(rest) if progress and rest else rest):
            self.see(name, get(name))
        stats = [self.stats[n] for n in names if n in self.stats]
        return _section(self.reader, stats, self.scales, self.config, self.during_forward)


class _Watched:
    """A reader whose sessions hand every tensor read to the scan first (otherwise the reader itself)."""

    def __init__(self, reader, scan: Scan):
        self._reader, self._scan = reader, scan

    def __getattr__(self, attr):
        return getattr(self._reader, attr)

    def __contains__(self, name: str) -> bool:
        return name in self._reader

    @contextmanager
    def session(self):
        with self._reader.session() as get:
            def watched(name: str):
                t = get(name)
                self._scan.see(name, t)
                return t

            yield watched


def scan(reader, config: dict | None = None, progress=None) -> dict:
    """The `weights` section of archprobe.observe/1 for a TensorReader (validate/load.py), read on its own."""
    return Scan(reader, config).finish(progress)


def _confirm(reader, stats: list[TensorStats]) -> None:
    """Replace colliding fingerprints (tensors and fused-expert slices) by full content hashes, reading
    just those tensors again: a duplicate is reported only when the bytes (as float32 values) agree."""
    seen: dict[str, list[tuple[TensorStats, int | None]]] = {}
    for s in stats:
        if s.constant or s.numel < 2:
            continue
        if s.digest.startswith("f"):
            seen.setdefault(s.digest, []).append((s, None))
        for e, d in enumerate(s.expert_digests or []):
            if d.startswith("f"):
                seen.setdefault(d, []).append((s, e))
    todo: dict[str, list[tuple[TensorStats, int | None]]] = {}
    for members in seen.values():
        if len(members) > 1:
            for s, e in members:
                todo.setdefault(s.name, []).append((s, e))
    for get, name in _sessions(reader, list(todo)):
        t = get(name)
        for s, e in todo[name]:
            if e is None:
                s.digest = _digest(t)
            else:
                s.expert_digests[e] = _digest(t[e])


def _section(reader, stats: list[TensorStats], scales: dict, config: dict, during_forward: int) -> dict:
    _confirm(reader, stats)
    outliers = find_outliers(stats)
    shares = {}
    for get, name in _sessions(reader, list(outliers)):   # only the flagged tensors are read again
        shares[name] = outlier_share(get(name), outliers[name]["threshold"])
        outliers[name]["share"] = shares[name]
    copies = duplicate_units(stats)
    cfg = config or {}
    tied = bool(cfg.get("tie_word_embeddings", (cfg.get("text_config") or {}).get("tie_word_embeddings", False)))
    return {
        "tensors": len(stats),
        "read_during_forward": during_forward,
        "nonfinite": [{"tensor": s.name, "count": s.nonfinite} for s in stats if s.nonfinite],
        "all_zero": [s.name for s in stats if s.all_zero],
        "duplicates": duplicate_groups(stats, tied),
        "duplicate_layers": copies[0], "duplicate_experts": copies[1],
        "stats": [{"tensor": s.name, "rms": s.rms, "max_abs": s.max_abs, "outlier_share": shares.get(s.name, 0.0),
                   "dtype": s.dtype, "shape": list(s.shape)} for s in stats],
        "outliers": [{"tensor": n, **o} for n, o in sorted(outliers.items())],
        "scale_histograms": [{**v, "histogram": {str(k): c for k, c in sorted(v["histogram"].items())}}
                             for v in scales.values()],
    }
