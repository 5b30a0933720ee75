"""The adaptation document (schema archprobe.adapt/1): every framework's status and feature table."""

from __future__ import annotations

from archprobe.adapt import engines, generic, hf, llamacpp
from archprobe.adapt.result import unknown
from archprobe.structure.checkpoint import Checkpoint, as_checkpoint
from archprobe.structure.inspect import document

SCHEMA = "archprobe.adapt/1"
FRAMEWORKS = ("transformers", "vllm", "sglang", "llama.cpp", "archprobe", "mlx-lm", "tensorrt-llm")


def adapt(source: str | Checkpoint | None = None, progress=None, only: list[str] | None = None, card=None,
          ecosystem=None, release_progress=None) -> dict:
    """The adaptation document; `card` (a user's architecture card) overrides the derived one.
    `ecosystem` (adapt.ecosystem.Ecosystem) adds released versions and upstream work; None: installed only."""
    ck = as_checkpoint(source, card, progress)
    return adapt_checkpoint(ck, document(ck.raw, ck.derived), only, ecosystem, release_progress)


def adapt_checkpoint(ck: Checkpoint, doc: dict, only: list[str] | None = None, ecosystem=None,
                     release_progress=None) -> dict:
    """From a checkpoint already opened and its `inspect` document (the report reads them once for both);
    archprobe's own probe builds the same card, the user's fields included."""
    raw, source = ck.raw, ck.source
    config = raw.config or {}
    features = doc["features"]
    present = {t.name for h in raw.headers for t in h.tensors}
    shapes = {t.name.replace("*", "0"): tuple(t.shape) for h in raw.headers for t in h.tensors}
    moe = any(k in ("moe", "latent_moe") for k in doc["architecture"].get("ffns", {}))
    gguf_arch = (raw.gguf_metadata or {}).get("general.architecture") if raw.kind == "gguf" else None
    wanted = only or list(FRAMEWORKS)
    results = []
    for name in wanted:
        if name == "transformers":
            results.append(hf.probe(config, features, present, gguf_arch))
        elif name in ("vllm", "sglang"):
            results.append(engines.probe(name, config, features))
        elif name == "llama.cpp":
            results.append(llamacpp.probe(config, features, present, doc["architecture"]["num_layers"] or 1,
                                          gguf_arch, moe))
        elif name == "archprobe":
            results.append(generic.probe(config, features, present, shapes, raw, ck.card) if raw.kind != "gguf" else
                           unknown(generic.NAME, None, "validate reads safetensors folders, not GGUF"))
    for r in results:
        r["source"] = "installed"
    eco = None
    if ecosystem is not None:
        from archprobe.adapt.ecosystem import add_ecosystem

        named = {**config, "model_type": config.get("model_type") or doc["model_type"],   # a GGUF file's names
                 "architectures": config.get("architectures") or doc["architectures"] or []}
        eco = add_ecosystem({"frameworks": results}, named, features, moe, ecosystem, source, only,
                            release_progress)["ecosystem"]
    matrix = {f["id"]: {r["framework"]: _status_of(r, f["id"]) for r in results} for f in features}
    return {"schema": SCHEMA, "source": doc["source"], "model_type": doc["model_type"],
            "wrapper_model_type": doc.get("wrapper_model_type"), "architectures": doc["architectures"],
            "features": [f["id"] for f in features], "frameworks": results, "matrix": matrix,
            "layer_plan": [[layer["mixer"], layer["ffn"]] for layer in doc["layers"]],
            "note": "What frameworks know is kept apart from what the weights say: see `inspect` for the latter.",
            **({"ecosystem": eco} if eco is not None else {})}


def _status_of(result: dict, fid: str) -> str:
    if not result["installed"]:
        return "not installed"
    row = next((r for r in result["features"] if r["feature"] == fid), None)
    return row["status"] if row else "n/a"
