"""`archprobe diff A B --data`: the two checkpoints' weights compared tensor by tensor, matched by card role.

Why by role: a GGUF conversion and its HF original name every tensor differently, but the card binds both to
the same role (`layers.3.ffn.down`), so the pair is found without a name table. Each side is read the way
validate reads it (validate/load.py: safetensors shards memory-mapped per tensor, GGUF tensors dequantized by
archprobe's own code with llama's q/k rows un-permuted; MXFP4, INT4 pack-quantized and FP8 block-scaled
companions dequantized as validate does), so a pair is two dense float32 tensors. One pair is resident at a
time: each pair is read in its own reader session (a memory map is dropped with it) and the statistics are
accumulated over slices, so no third full-size tensor is made.

Per tensor (A is the reference): relative error ||B - A|| / ||A||, max |B - A|, cosine(A, B), and the outlier
share: the fraction of entries whose |B - A| exceeds A's RMS (an error as large as a typical weight; rounding
to 4 bits stays far below it, a corrupted block does not). Per layer: the mean and the largest relative error
of its tensors (each tensor counts once, so a norm gain of ~1 does not drown the small matrices), the largest
max error, the smallest cosine and the outlier share over all its entries. A layer is flagged when its mean
relative error is above zero and above 3x the median layer's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from archprobe.errors import ArchprobeError

SLICE = 1 << 18                 # entries per accumulation step (1 MiB of float32 per temporary)
FLAG_FACTOR = 3.0               # a layer this many times the median layer's relative error is flagged
DEQUANTIZED = {"weight_packed", "weight_scale", "weight_shape", "weight_zero_point", "weight_scale_inv"}
_LAYER = re.compile(r"^layers\.(\d+)\.")


@dataclass
class Weights:
    """One side opened for reading: base role -> {companion leaf ("" = the tensor itself): checkpoint name}."""

    loaded: object              # validate.load.Loaded
    roles: dict[str, dict[str, str]]


def open_weights(source: str) -> Weights:
    """A local folder or .gguf file opened as validate opens it (hub ids: download with validate first)."""
    import os

    from archprobe.validate.load import load

    if not os.path.exists(source):
        raise ArchprobeError(f"{source}: --data and --forward read local checkpoints (a folder or a .gguf file)",
                             hint="fetch a hub repo first, e.g. with `huggingface-cli download`")
    loaded = load(source)
    roles: dict[str, dict[str, str]] = {}
    for role, name in loaded.card.expand():
        base, _, leaf = role.partition("#")
        roles.setdefault(base, {})[leaf] = name
    return Weights(loaded, roles)


def _dense(group: dict[str, str], get) -> torch.Tensor:
    """The float32 tensor of one role: stored plain, or dequantized from the companions validate reads."""
    from archprobe.validate.quant import lazy_dequantize

    modules = {("x.weight" if leaf == "" else f"x.{leaf}"): name for leaf, name in group.items()}
    loaders = lazy_dequantize(modules, get, torch.float32)
    return loaders["x.weight"]().float()


def _readable(group: dict[str, str]) -> str | None:
    """None when the role's storage can be made dense here; else why not (the companions' names)."""
    extra = sorted(leaf for leaf in group if leaf and leaf not in DEQUANTIZED)
    if extra:
        return "stored as " + ", ".join(f"#{leaf}" for leaf in extra) + " (a scheme --data does not dequantize)"
    if "" not in group and "weight_packed" not in group:
        return "no weight tensor among its companions"
    return None


class Sums:
    """Running sums for the four statistics over any number of (A, B) slices."""

    def __init__(self):
        self.n = self.outliers = self.nonfinite = 0
        self.aa = self.bb = self.ab = self.dd = self.max_err = 0.0

    def add(self, a: torch.Tensor, b: torch.Tensor, threshold: float) -> None:
        """Products in float32, sums in float64 (a float32 product is within 2^-24 of the exact one)."""
        f64 = torch.float64
        d = b - a
        self.n += a.numel()
        self.aa += float(torch.sum(a * a, dtype=f64))
        self.bb += float(torch.sum(b * b, dtype=f64))
        self.ab += float(torch.sum(a * b, dtype=f64))
        self.dd += float(torch.sum(d * d, dtype=f64))
        d.abs_()
        if d.numel():
            self.max_err = max(self.max_err, float(d.max()))
        self.outliers += int((d > threshold).sum())
        self.nonfinite += int((~torch.isfinite(d)).sum())   # NaN or inf on either side

    def stats(self) -> dict:
        rel = (self.dd / self.aa) ** 0.5 if self.aa > 0 else (0.0 if self.dd == 0 else float("inf"))
        denom = (self.aa * self.bb) ** 0.5
        cos = self.ab / denom if denom > 0 else (1.0 if self.aa == self.bb == 0 else 0.0)
        return {"rel_error": rel, "max_error": self.max_err, "cosine": cos,
                "outlier_share": self.outliers / self.n if self.n else 0.0, "nonfinite": self.nonfinite}


def tensor_sums(a: torch.Tensor, b: torch.Tensor) -> Sums:
    """The sums of one pair, slice by slice (A's RMS sets the outlier threshold)."""
    fa, fb = a.reshape(-1), b.reshape(-1)
    squares = sum(float(torch.sum(fa[i:i + SLICE].square(), dtype=torch.float64)) for i in range(0, fa.numel(), SLICE))
    rms = (squares / max(fa.numel(), 1)) ** 0.5
    s = Sums()
    for i in range(0, fa.numel(), SLICE):
        s.add(fa[i:i + SLICE], fb[i:i + SLICE], rms)
    return s


def layer_of(role: str) -> str:
    m = _LAYER.match(role)
    return m.group(1) if m else "model"


def data_diff(a: Weights, b: Weights, limit: int = 200, progress=None) -> dict:
    """The `data` section of archprobe.diff/1: every role both sides bind, compared."""
    shared = [r for r in a.roles if r in b.roles]
    rows, skipped, per_layer = [], [], {}
    for role in (progress(shared) if progress else shared):
        why = _readable(a.roles[role]) or _readable(b.roles[role])
        if why:
            skipped.append({"role": role, "why": why})
            continue
        with a.loaded.reader.session() as get_a, b.loaded.reader.session() as get_b:
            try:
                ta = _dense(a.roles[role], get_a)
                tb = _dense(b.roles[role], get_b)
            except (ValueError, RuntimeError) as exc:   # companions that do not fit the scheme's layout
                skipped.append({"role": role, "why": f"cannot dequantize ({str(exc).splitlines()[0][:160]})"})
                continue
            if tuple(ta.shape) != tuple(tb.shape):
                skipped.append({"role": role, "why": f"shapes differ: {list(ta.shape)} vs {list(tb.shape)}"})
                continue
            sums = tensor_sums(ta, tb)
            identical = bool(torch.equal(ta, tb))
            del ta, tb
        rows.append({"role": role, "a": a.roles[role].get("") or a.roles[role].get("weight_packed"),
                     "b": b.roles[role].get("") or b.roles[role].get("weight_packed"), "identical": identical,
                     "elements": sums.n, **sums.stats()})
        per_layer.setdefault(layer_of(role), []).append((sums, rows[-1]))
    layers = [layer_stats(k, v) for k, v in sorted(per_layer.items(), key=lambda kv: _layer_key(kv[0]))]
    flagged = flag_layers(layers)
    for row in layers:
        row["flagged"] = row["layer"] in flagged
    differing = [r for r in rows if not r["identical"]]
    differing.sort(key=lambda r: -_ordered(r["rel_error"]))
    worst = max((r for r in layers if r["layer"] != "model"), key=lambda r: _ordered(r["rel_error"]), default=None)
    return {
        "compared": len(rows), "identical": len(rows) - len(differing), "differing": len(differing),
        "only_a": sorted(r for r in a.roles if r not in b.roles)[:limit],
        "only_b": sorted(r for r in b.roles if r not in a.roles)[:limit],
        "skipped": skipped[:limit],
        "tensors": {"total": len(differing), "items": differing[:limit], "left_out": max(0, len(differing) - limit)},
        "layers": layers,
        "flagged_layers": [r["layer"] for r in layers if r["flagged"]],
        "worst_layer": worst["layer"] if worst and _ordered(worst["rel_error"]) > 0 else None,
    }


def layer_stats(layer: str, tensors: list[tuple[Sums, dict]]) -> dict:
    rels = [row["rel_error"] for _, row in tensors]
    n = sum(s.n for s, _ in tensors)
    return {"layer": layer, "tensors": len(tensors), "rel_error": sum(rels) / len(rels),
            "max_rel_error": max(rels), "max_error": max(row["max_error"] for _, row in tensors),
            "cosine": min(row["cosine"] for _, row in tensors),
            "outlier_share": sum(s.outliers for s, _ in tensors) / n if n else 0.0,
            "nonfinite": sum(s.nonfinite for s, _ in tensors)}


def _layer_key(k: str):
    return (0, int(k)) if k.isdigit() else (1, 0)


def flag_layers(layers: list[dict]) -> set[str]:
    """Decoder layers whose relative error is above zero and FLAG_FACTOR x the median decoder layer's."""
    rels = sorted(_ordered(r["rel_error"]) for r in layers if r["layer"] != "model")
    if not rels:
        return set()
    mid = len(rels) // 2
    median = rels[mid] if len(rels) % 2 else 0.5 * (rels[mid - 1] + rels[mid])
    return {r["layer"] for r in layers
            if r["layer"] != "model" and _ordered(r["rel_error"]) > 0
            and _ordered(r["rel_error"]) > FLAG_FACTOR * median}


def _ordered(v: float) -> float:
    """NaN (a non-finite entry on one side) orders as the largest error, never as none."""
    return float("inf") if v != v else v
