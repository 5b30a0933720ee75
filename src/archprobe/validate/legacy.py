"""TRANSITIONAL (removed once structure.derive, issue 13, is merged): the family-mapping validate path,
used by `archprobe.validate.validate` only while this archprobe has no card derivation.

`validate`: a forward pass through archprobe.nn, one layer at a time, weights streamed from disk.

Only embedding, final norm and head stay resident; each decoder layer is built, filled from the
shards (memory-mapped safetensors reads of just its tensors), run, and dropped before the next one.
Per layer: output RMS, max |x|, finiteness, seconds. With `reference="transformers"` the same
checkpoint runs through transformers (only model types it ships; never trust_remote_code) and the
final logits are compared (max |diff|, KL, top-1 agreement) along with per-layer hidden states.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator

import torch

from archprobe.errors import ArchprobeError, CheckpointError, SourceError
from archprobe.validate.legacy_mapping import Unsupported, hybrid_config, lazy_dequantize, module_name

SCHEMA = "archprobe.validate/1"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class WeightIndex:
    """checkpoint tensor name -> shard file, for a local folder (headers only; data read on demand)."""

    def __init__(self, folder: str):
        from safetensors import safe_open

        self.folder = folder
        self.files: dict[str, str] = {}
        self.shapes: dict[str, tuple] = {}
        names = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
        index_path = os.path.join(folder, "model.safetensors.index.json")
        if os.path.isfile(index_path):  # the index names the shards: each must be here, nothing else is read
            from archprobe.formats.sources import MAX_INDEX_BYTES, parse_index_bytes, shard_names_from_index

            with open(index_path, "rb") as f:
                named = shard_names_from_index(parse_index_bytes(f.read(MAX_INDEX_BYTES), index_path), index_path)
            for n in named:
                if not os.path.isfile(os.path.join(folder, n)):
                    raise CheckpointError(os.path.join(folder, n), "shard named by the index is missing")
            names = named
        if not names:
            raise SourceError(f"{folder}: no .safetensors shards to validate")
        for f in names:
            path = os.path.join(folder, f)
            try:
                with safe_open(path, framework="pt") as s:
                    for k in s.keys():
                        self.files[k] = path
                        self.shapes[k] = tuple(s.get_slice(k).get_shape())
            except Exception as exc:  # the safetensors library raises its own error types
                raise CheckpointError(path, f"cannot read shard ({str(exc).splitlines()[0][:160]})") from None

    def opener(self):
        """A context manager yielding `get(name) -> tensor`, each shard opened once."""
        from contextlib import ExitStack, contextmanager

        from safetensors import safe_open

        @contextmanager
        def session():
            with ExitStack() as stack:
                handles: dict[str, object] = {}

                def get(name: str) -> torch.Tensor:
                    path = self.files[name]
                    try:
                        if path not in handles:
                            handles[path] = stack.enter_context(safe_open(path, framework="pt"))
                        return handles[path].get_tensor(name)
                    except Exception as exc:
                        raise CheckpointError(path, f"cannot read tensor data "
                                                    f"({str(exc).splitlines()[0][:160]})") from None

                yield get

        return session()


def _stats(h: torch.Tensor, seconds: float, index: int, kind: str) -> dict:
    f = h.float()
    return {"index": index, "kind": kind, "out_rms": f.pow(2).mean().sqrt().item(), "max_abs": f.abs().max().item(),
            "finite": bool(torch.isfinite(f).all()), "seconds": round(seconds, 4)}


def _parse_layers(spec: str | None, n: int) -> int:
    """'0-3' -> run layers 0..3 (returns the count); None -> all."""
    if not spec:
        return n
    try:
        lo, _, hi = spec.partition("-")
        lo, hi = int(lo), int(hi or lo)
    except ValueError:
        raise ArchprobeError(f"--layers {spec!r}: use a range like 0-3") from None
    if lo != 0 or not 0 <= hi < n:
        raise ArchprobeError(f"--layers {spec!r}: layers run from 0, and the model has {n}")
    return hi + 1


def validate(source: str, prompt_ids: list[int] | None = None, reference: str = "none", dtype: str = "float32",
             layers: str | None = None, save_logits: str | None = None, progress=None, *, prompt: str | None = None,
             pin_routing: bool = False, offload_dir: str | None = None, fetch_progress=None) -> dict:
    """The `archprobe.validate/1` document for a local checkpoint folder or a hub repo.

    `progress`, if given, wraps the iterable of layer indices (the CLI passes a rich progress bar).
    A hub source downloads only the shards holding the layers that run. `pin_routing` runs the
    transformers reference first and makes every MoE block choose its experts from the input the
    reference's block saw. `offload_dir` keeps each layer's output on disk instead of in memory."""
    from archprobe.nn.decoder import DecoderLayer, HybridDecoder
    from archprobe.nn.loading import LoadError, load_strict, sanitize
    from archprobe.nn.moe import MoE

    if dtype not in DTYPES:
        raise ArchprobeError(f"--dtype {dtype!r}: use float32 or bfloat16")
    if pin_routing and reference != "transformers":
        raise ArchprobeError("--pin-routing pins to the reference's choices", hint="add --reference transformers")
    fetched = None
    if not os.path.isdir(source):
        from archprobe.formats.sources import HUB_ID

        if not (HUB_ID.match(source) and not source.startswith((".", "/", "~")) and not os.path.exists(source)):
            raise SourceError(f"{source}: validate needs a local checkpoint folder or a hub repo id")
        from archprobe.validate.fetch import fetch_layers
        from archprobe.validate.legacy_mapping import text_config

        source, fetched = fetch_layers(
            source, lambda cfg: _parse_layers(layers, int(text_config(cfg).get("num_hidden_layers") or 0)),
            progress=fetch_progress)
    cfg_path = os.path.join(source, "config.json")
    if not os.path.isfile(cfg_path):
        raise SourceError(f"{source}: no config.json")
    with open(cfg_path) as f:
        config = json.load(f)
    if prompt is not None:
        from archprobe.validate.prompt import encode

        prompt_ids = encode(source, prompt)
    index = WeightIndex(source)
    doc: dict = {"schema": SCHEMA, "status": "pass", "mapped_tensors": 0, "unmapped_tensors": [],
                 "missing_tensors": [], "layers": [], "reference": None, "peak_rss_bytes": 0}
    if fetched:
        doc["fetched"] = fetched
    try:
        cfg = hybrid_config(config, index.shapes)
    except Unsupported as exc:
        doc.update(status="unsupported", reasons=[exc.message],
                   unmapped_tensors=sorted(index.files)[:50])
        return doc
    torch_dtype = DTYPES[dtype]
    by_layer: dict[int | None, list[tuple[str, str]]] = {}
    for name in index.files:
        where = module_name(name, cfg)
        if where is None:
            doc["unmapped_tensors"].append(name)
        else:
            by_layer.setdefault(where[0], []).append((name, where[1]))
    doc["unmapped_tensors"].sort()
    problems: list[str] = []

    model = None

    def load_into(module, pairs, what, assign=False):
        with index.opener() as get:
            local = lazy_dequantize({m: n for n, m in pairs}, get, torch_dtype,
                                    keep_packed_experts=cfg.expert_storage == "mxfp4")
            if module is model and cfg.tie_word_embeddings and "embed_tokens.weight" in local:
                local.setdefault("lm_head.weight", local["embed_tokens.weight"])
            state = sanitize(local)
        try:
            load_strict(module, state, what=what, assign=assign)
        except LoadError as exc:
            problems.append(exc.message)
            return False
        doc["mapped_tensors"] += len(pairs)
        return True

    ids = torch.tensor([prompt_ids or [1, 2, 3, 4, 5, 6, 7, 8]])
    if int(ids.max()) >= cfg.vocab_size or int(ids.min()) < 0:
        raise ArchprobeError(f"--prompt-ids must lie in [0, {cfg.vocab_size})")
    ref = None
    if reference == "transformers" and pin_routing:   # the reference runs first: its choices pin ours
        from archprobe.validate.reference import run_transformers

        ref = run_transformers(source, config, ids, capture_moe=True)
        if isinstance(ref, dict):
            raise ArchprobeError(f"--pin-routing: {ref['error']}")
    with torch.device("meta"):
        model = HybridDecoder(cfg, build_layers=False).to(torch_dtype).eval()
    load_into(model, by_layer.get(None, []), "model-level tensors", assign=True)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    n_run = _parse_layers(layers, cfg.num_hidden_layers)
    timings: list[float] = []
    moe_of: dict[int, MoE] = {}

    def stream() -> Iterator:
        for i in (progress(range(n_run)) if progress else range(n_run)):
            start = time.perf_counter()
            with torch.device("meta"):  # no allocation: the loaded tensors become the parameters
                layer = DecoderLayer(cfg, i).to(torch_dtype).eval()
            if not load_into(layer, by_layer.get(i, []), f"layer {i}", assign=True):
                raise _Stop()
            if ref is not None and i in ref.moe_inputs:
                moe = next((m for m in layer.modules() if isinstance(m, MoE)), None)
                if moe is not None:
                    moe_of[i] = moe
            timings.append(time.perf_counter() - start)
            yield layer

    hidden = HiddenStore(offload_dir)
    flips: dict[int, int] = {}

    def hook(i, h):
        hidden.add(i, h.detach())
        if i in moe_of:
            flips[i] = moe_of.pop(i).pinned_flips
        t = time.perf_counter()
        doc["layers"].append(_stats(h, timings[i] + (t - hook.t0), i,
                                    f"{cfg.mixer_types[i]}+{cfg.ffn_types[i]}"))
        hook.t0 = t

    hook.t0 = time.perf_counter()
    logits = None
    with torch.no_grad():
        try:
            h, _ = model.hidden_states(model.embed_tokens(ids), layer_hook=hook, layers=stream(),
                                       routing_pins=ref.moe_inputs if ref is not None else None)
            if n_run == cfg.num_hidden_layers:
                logits = model.lm_head(h).float()
        except _Stop:
            pass
    doc["missing_tensors"] = sorted({p for p in problems})
    if problems or not all(layer["finite"] for layer in doc["layers"]):
        doc["status"] = "fail"
    if offload_dir:
        doc["offload"] = {"dir": offload_dir, "bytes": hidden.bytes_on_disk, "layers": len(hidden)}
    if pin_routing:
        doc["routing_pinned"] = {"layers": len(flips), "tokens_flipped": sum(flips.values()),
                                 "per_layer": {str(k): v for k, v in sorted(flips.items())}}
    if logits is not None:
        if save_logits:
            from safetensors.torch import save_file

            save_file({"logits": logits.contiguous()}, save_logits)
        if reference == "transformers":
            from archprobe.validate.reference import compare, run_transformers

            if ref is None:
                ref = run_transformers(source, config, ids)
            doc["reference"] = ref if isinstance(ref, dict) else compare(ref, logits, hidden.get)
            if doc["reference"].get("error"):
                doc["status"] = "fail" if doc["status"] == "pass" else doc["status"]
    hidden.close()
    doc["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return doc


class HiddenStore:
    """Each layer's output for the per-layer comparison: in memory, or one file per layer on disk
    (`--offload-dir`) so a long prompt's L x T x H outputs never sit in RAM together."""

    def __init__(self, folder: str | None):
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
