"""`validate`: a forward pass through archprobe.nn, one layer at a time, weights streamed from disk.

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
from archprobe.validate.mapping import Unsupported, hybrid_config, lazy_dequantize, module_name

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
             layers: str | None = None, save_logits: str | None = None, progress=None) -> dict:
    """The `archprobe.validate/1` document for a local checkpoint folder.

    `progress`, if given, wraps the iterable of layer indices (the CLI passes a rich progress bar)."""
    from archprobe.nn.decoder import DecoderLayer, HybridDecoder
    from archprobe.nn.loading import LoadError, load_strict, sanitize

    if not os.path.isdir(source):
        raise SourceError(f"{source}: validate needs a local checkpoint folder")
    if dtype not in DTYPES:
        raise ArchprobeError(f"--dtype {dtype!r}: use float32 or bfloat16")
    cfg_path = os.path.join(source, "config.json")
    if not os.path.isfile(cfg_path):
        raise SourceError(f"{source}: no config.json")
    with open(cfg_path) as f:
        config = json.load(f)
    index = WeightIndex(source)
    doc: dict = {"schema": SCHEMA, "status": "pass", "mapped_tensors": 0, "unmapped_tensors": [],
                 "missing_tensors": [], "layers": [], "reference": None, "peak_rss_bytes": 0}
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

    with torch.device("meta"):
        model = HybridDecoder(cfg, build_layers=False).to(torch_dtype).eval()
    load_into(model, by_layer.get(None, []), "model-level tensors", assign=True)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    n_run = _parse_layers(layers, cfg.num_hidden_layers)
    timings: list[float] = []

    def stream() -> Iterator:
        for i in (progress(range(n_run)) if progress else range(n_run)):
            start = time.perf_counter()
            with torch.device("meta"):  # no allocation: the loaded tensors become the parameters
                layer = DecoderLayer(cfg, i).to(torch_dtype).eval()
            if not load_into(layer, by_layer.get(i, []), f"layer {i}", assign=True):
                raise _Stop()
            timings.append(time.perf_counter() - start)
            yield layer

    ids = torch.tensor([prompt_ids or [1, 2, 3, 4, 5, 6, 7, 8]])
    if int(ids.max()) >= cfg.vocab_size or int(ids.min()) < 0:
        raise ArchprobeError(f"--prompt-ids must lie in [0, {cfg.vocab_size})")
    hidden: list[torch.Tensor] = []

    def hook(i, h):
        hidden.append(h.detach())
        t = time.perf_counter()
        doc["layers"].append(_stats(h, timings[i] + (t - hook.t0), i,
                                    f"{cfg.mixer_types[i]}+{cfg.ffn_types[i]}"))
        hook.t0 = t

    hook.t0 = time.perf_counter()
    logits = None
    with torch.no_grad():
        try:
            h, _ = model.hidden_states(model.embed_tokens(ids), layer_hook=hook, layers=stream())
            if n_run == cfg.num_hidden_layers:
                logits = model.lm_head(h).float()
        except _Stop:
            pass
    doc["missing_tensors"] = sorted({p for p in problems})
    if problems or not all(layer["finite"] for layer in doc["layers"]):
        doc["status"] = "fail"
    if logits is not None:
        if save_logits:
            from safetensors.torch import save_file

            save_file({"logits": logits.contiguous()}, save_logits)
        if reference == "transformers":
            doc["reference"] = _transformers_reference(source, config, ids, logits, hidden)
            if doc["reference"].get("error"):
                doc["status"] = "fail" if doc["status"] == "pass" else doc["status"]
    doc["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return doc


class _Stop(Exception):
    """A layer failed to load; the problem is already recorded."""


def _transformers_reference(folder: str, config: dict, ids, logits, hidden) -> dict:
    try:
        from transformers import AutoModelForCausalLM
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except ImportError:
        return {"name": "transformers", "error": "transformers is not installed (pip install 'archprobe[hf]')"}
    mt = config.get("model_type")
    if mt not in CONFIG_MAPPING:
        return {"name": "transformers", "error": f"transformers ships no {mt!r} model (remote code is never run)"}
    ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, trust_remote_code=False).eval()
    with torch.no_grad():
        out = ref(ids, output_hidden_states=True, use_cache=False)
    ref_logits = out.logits.float()
    logp_ref = torch.log_softmax(ref_logits, -1)
    logp = torch.log_softmax(logits, -1)
    kl = (logp_ref.exp() * (logp_ref - logp)).sum(-1).mean().item()
    per_layer = []
    for i, h in enumerate(hidden[:-1]):  # transformers' last hidden state is after the final norm
        r = out.hidden_states[i + 1].float()
        per_layer.append((h.float() - r).abs().max().item())
    return {"name": f"transformers {ref.__class__.__name__}", "max_abs_diff": (ref_logits - logits).abs().max().item(),
            "logit_scale": ref_logits.abs().max().item(), "kl": kl,
            "top1_agreement": (ref_logits.argmax(-1) == logits.argmax(-1)).float().mean().item(),
            "per_layer_max_abs_diff": per_layer}
