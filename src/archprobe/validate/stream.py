"""validate's stream step: a forward pass through archprobe.nn, one layer at a time, weights from disk.

Only embedding, final norm and head stay resident; each decoder layer is built on the meta device,
filled from the shards (memory-mapped reads of just its tensors, dequantized, split or stacked as the
blueprint says), run, and dropped before the next one. Per layer: output RMS, max |x|, finiteness,
seconds. Routing pins (validate --pin-routing) are an argument of the forward, not module state.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from archprobe.validate.build import Blueprint
from archprobe.validate.layouts import Part, Source


@dataclass
class StreamResult:
    logits: torch.Tensor | None
    layers: list[dict]
    problems: list[str]
    mapped: int
    hidden: HiddenStore
    flips: dict[int, int] = field(default_factory=dict)


def _stats(h: torch.Tensor, seconds: float, index: int, kind: str) -> dict:
    f = h.float()
    return {"index": index, "kind": kind, "out_rms": f.pow(2).mean().sqrt().item(), "max_abs": f.abs().max().item(),
            "finite": bool(torch.isfinite(f).all()), "seconds": round(seconds, 4)}


def part_state(part: Part, get, dtype: torch.dtype, keep_packed: bool, tie_from: str | None = None) -> dict:
    """A Part's module state (loaders resolved lazily by `nn.loading.sanitize`): dequantized, derived
    tensors computed from their (cached, dequantized) sources, per-expert tensors stacked. Sources no
    derived tensor reads (`Layout.UNUSED`) are never read."""
    from archprobe.nn.loading import LoadError, sanitize, tensor_of
    from archprobe.validate.quant import lazy_dequantize

    loaders = lazy_dequantize(part.names, get, dtype, keep_packed_experts=keep_packed)
    stored = lazy_dequantize({s.key: n for s, n in part.sources.items()}, get, dtype, keep_packed_experts=keep_packed)
    cache: dict[str, torch.Tensor] = {}

    def source(src: Source) -> torch.Tensor:
        if src.key not in cache:
            cache[src.key] = tensor_of(stored[src.key])
        return cache[src.key]

    def derive(d):
        try:
            return d.fn(*(source(s) for s in d.sources))
        except (RuntimeError, ValueError, IndexError) as exc:   # a layout the stored tensor does not fit
            names = ", ".join(part.sources.get(s, s.stored) for s in d.sources)
            raise LoadError(f"{d.target}: cannot derive it from {names} as the card's layout says "
                            f"({str(exc).splitlines()[0][:120]})") from None

    for d in part.derived:
        loaders[d.target] = (lambda d=d: derive(d))
    if tie_from is not None and tie_from in loaders:
        loaders.setdefault("lm_head.weight", loaders[tie_from])
    return sanitize(loaders)


def stream_forward(bp: Blueprint, reader, ids: torch.Tensor, dtype: torch.dtype, n_run: int, *,
                   routing_pins: dict | None = None, progress=None, offload_dir: str | None = None,
                   observer=None) -> StreamResult:
    """Run the first `n_run` layers of the blueprint's model on `ids`; logits when every layer ran.

    `observer` (archprobe observe) sees the model once its resident tensors loaded (`model(m)`), each
    layer once loaded and before it runs (`layer(i, layer)`), and each layer's output (`output(i, h)`)."""
    from archprobe.nn.decoder import DecoderLayer, HybridDecoder
    from archprobe.nn.loading import LoadError, load_strict
    from archprobe.nn.moe import MoE

    cfg = bp.config
    problems: list[str] = []
    mapped = [0]
    keep_packed = cfg.expert_storage == "mxfp4"

    def load_into(module, part: Part | None, what: str, tie: bool = False) -> bool:
        part = part or Part()
        try:
            with reader.session() as get:
                state = part_state(part, get, dtype, keep_packed, "embed_tokens.weight" if tie else None)
            load_strict(module, state, what=what, assign=True)
        except LoadError as exc:
            problems.append(exc.message)
            return False
        mapped[0] += len(part.names) + len(part.sources)
        return True

    with torch.device("meta"):
        model = HybridDecoder(cfg, build_layers=False).to(dtype).eval()
    load_into(model, bp.parts.get(None), "model-level tensors", tie=cfg.tie_word_embeddings)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    if observer is not None:
        observer.model(model)
    timings: list[float] = []
    current: dict[int, DecoderLayer] = {}

    def layers() -> Iterator:
        for i in (progress(range(n_run)) if progress else range(n_run)):
            start = time.perf_counter()
            with torch.device("meta"):  # no allocation: the loaded tensors become the parameters
                layer = DecoderLayer(cfg.layer_spec(i)).to(dtype).eval()
            if not load_into(layer, bp.parts.get(i), f"layer {i}"):
                raise _Stop()
            current.clear()
            current[i] = layer
            if observer is not None:
                observer.layer(i, layer)
            timings.append(time.perf_counter() - start)
            yield layer

    hidden = HiddenStore(offload_dir)
    stats: list[dict] = []
    flips: dict[int, int] = {}

    def hook(i, h):
        hidden.add(i, h.detach())
        if observer is not None:
            observer.output(i, h.detach())
        if routing_pins and i in routing_pins:
            moe = next((m for m in current[i].modules() if isinstance(m, MoE)), None)
            if moe is not None:
                flips[i] = moe.pinned_flips
        t = time.perf_counter()
        stats.append(_stats(h, timings[i] + (t - hook.t0), i, f"{cfg.mixer_types[i]}+{cfg.ffn_types[i]}"))
        hook.t0 = t

    hook.t0 = time.perf_counter()
    logits = None
    with torch.no_grad():
        try:
            h, _ = model.hidden_states(model.embed(ids), layer_hook=hook, layers=layers(), routing_pins=routing_pins)
            if n_run == cfg.num_hidden_layers:
                logits = model.logits(h).float()
        except _Stop:
            pass
    return StreamResult(logits, stats, problems, mapped[0], hidden, flips)


class HiddenStore:
    """Each layer's output for the per-layer comparison: in memory, or one file per layer on disk
    (`--offload-dir`) so a long prompt's L x T x H outputs never sit in RAM together."""

    def __init__(self, folder: str | None):
        from archprobe.errors import ArchprobeError

        self.folder = folder
        self.items: dict[int, torch.Tensor | str] = {}
        self.bytes_on_disk = 0
        if folder:
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as exc:
                raise ArchprobeError(f"--offload-dir {folder}: cannot create it ({exc.strerror})") from None

    def __len__(self) -> int:
        return len(self.items)

    def add(self, i: int, h: torch.Tensor) -> None:
        if not self.folder:
            self.items[i] = h
            return
        from safetensors.torch import save_file

        path = os.path.join(self.folder, f"hidden-{i:05d}.safetensors")
        save_file({"h": h.contiguous()}, path)
        self.bytes_on_disk += os.path.getsize(path)
        self.items[i] = path

    def get(self, i: int) -> torch.Tensor:
        item = self.items[i]
        if isinstance(item, torch.Tensor):
            return item
        from safetensors.torch import load_file

        return load_file(item)["h"]

    def close(self) -> None:
        for item in self.items.values():
            if isinstance(item, str) and os.path.exists(item):
                os.remove(item)
        self.items.clear()


class _Stop(Exception):
    """A layer failed to load; the problem is already recorded."""
