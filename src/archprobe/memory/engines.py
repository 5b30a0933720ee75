"""Serving engines as named, versioned rules: how much of a device each lets the model use, how it pages the
caches, what it reserves before sizing them. Every rule is printed as an assumption with the version it was
read from; a user's option (`--gpu-memory-utilization 0.95`, `--block-size 256`) replaces the default and
the printed rule says so.

Sources (read, not copied):
  vLLM   vllm/config/cache.py (CacheConfig: gpu_memory_utilization=0.9, block_size 16 on CUDA),
         vllm/engine/arg_utils.py (EngineArgs.get_batch_defaults: the OpenAI server on a GPU of >= 70 GiB whose
         name does not contain "a100" uses max_num_batched_tokens 8192 and max_num_seqs 1024; on other GPUs
         2048 and 256; the LLM class 16384 / 1024 and 8192 / 256),
         vllm/v1/worker/gpu_worker.py determine_available_memory (KV pool = total * utilization - weights -
         the profiled peak of a dummy forward at max_num_batched_tokens - non-torch memory; CUDA-graph memory
         estimated and reserved before the pool since ~0.11), vllm/v1/core/kv_cache_utils.py (hybrid manager:
         a sliding-window layer needs only ceil(window / block) + 1 blocks per request; a Mamba / linear-attention
         layer holds one state per request).
  SGLang python/sglang/srt/server_args.py (mem_fraction_static: the share of memory for weights + KV pool,
         the rest for activations and CUDA graphs; when not given, _handle_gpu_memory_settings picks
         chunked_prefill_size and cuda_graph_max_bs by the GPU's memory in MiB, reserves 512 MiB +
         1.5 MiB per prefill-chunk token + 2 MiB per graph batch + TP x PP / 8 GiB, at least 10 GiB on GPUs
         over 60 GiB, + 2 GiB for EAGLE/MTP drafts, and takes (memory - reserved) / memory rounded to 3 places;
         0.88 when the memory is unknown), mem_cache/memory_pool.py
         (page_size 1 token pool; MLATokenToKVPool holds kv_lora_rank + rope dims per token per layer, one copy
         per TP rank; SWA and Mamba pools for hybrid models).
  llama.cpp src/llama-context.cpp / llama-kv-cache.cpp (n_ctx padded to 256 cells; the whole device).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archprobe.errors import ArchprobeError


class EngineError(ArchprobeError):
    pass


@dataclass
class Engine:
    name: str
    version: str
    block_size: int = 1                  # tokens per KV page
    memory_fraction: float = 1.0         # share of device memory the engine lets itself use
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    cuda_graph_tokens: int = 0           # the largest captured decode batch (its activations are kept)
    swa_blocks_only: bool = False        # sliding-window layers allocate only the window (+ 1 block)
    fraction_covers: str = "all"         # "all": fraction covers weights + KV + activations; "static": weights + KV
    rules: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "rules": list(self.rules)}


ENGINE_NAMES = ("vllm", "sglang", "llamacpp")
VLLM_VERSION = "0.11 (vllm-project/vllm: config/cache.py, engine/arg_utils.py, v1/worker/gpu_worker.py)"
SGLANG_VERSION = "0.5 (sgl-project/sglang: srt/server_args.py, srt/mem_cache/memory_pool.py)"
LLAMACPP_VERSION = "b6000 (ggml-org/llama.cpp: src/llama-context.cpp, src/llama-kv-cache.cpp)"


def sglang_default_fraction(memory_bytes: int | None, tp: int = 1, pp: int = 1, speculative: bool = False
                            ) -> tuple[float, str]:
    """SGLang's mem_fraction_static when the user gives none (server_args._handle_gpu_memory_settings)."""
    if memory_bytes is None:
        return 0.88, "the device's memory is unknown: SGLang's fallback 0.88"
    mib = memory_bytes / 2 ** 20
    small = tp < 4
    if mib < 20 * 1024:
        chunk, graph = 2048, 8
    elif mib < 35 * 1024:
        chunk, graph = 2048, 24 if small else 80
    elif mib < 60 * 1024:
        chunk, graph = 4096, 32 if small else 160
    elif mib < 160 * 1024:
        chunk, graph = 8192, 256 if small else 512
    else:
        chunk, graph = 16384, 512
    reserved = 512 + max(chunk, 2048) * 1.5 + graph * 2 + tp * pp / 8 * 1024
    if mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if speculative:
        reserved += 2 * 1024
    frac = round((mib - reserved) / mib, 3)
    return frac, (f"SGLang's default for {mib:,.0f} MiB at TP{tp} x PP{pp}: chunked_prefill_size {chunk}, "
                  f"cuda_graph_max_bs {graph}, {reserved:,.0f} MiB reserved"
                  + (" (2 GiB of it for the draft)" if speculative else "") + ", (memory - reserved) / memory")


def _chosen(value, default, what: str) -> tuple:
    return (default, f"{what} {default} (default)") if value is None else (value, f"{what} {value} (given)")


def engine(name: str | None, *, gpu_memory_utilization: float | None = None, block_size: int | None = None,
           max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None,
           mem_fraction_static: float | None = None, cuda_graphs: bool = True,
           device_memory_bytes: int | None = None, device_name: str = "", tp: int = 1, pp: int = 1,
           speculative_tokens: int = 0) -> Engine | None:
    """The rule set of engine `name` with the user's overrides; None for no engine (the bare model).
    vLLM's batch defaults depend on the device (`device_memory_bytes`, `device_name`; unknown: a large one)."""
    if name is None or name == "reference":
        return None
    if name == "vllm":
        util, u = _chosen(gpu_memory_utilization, 0.9, "gpu_memory_utilization")
        bs, b = _chosen(block_size, 16, "block_size")
        large = (device_memory_bytes is None or device_memory_bytes >= 70 * 2**30) and "a100" not in device_name.lower()
        mbt, m = _chosen(max_num_batched_tokens, 8192 if large else 2048, "max_num_batched_tokens")
        seqs, s = _chosen(max_num_seqs, 1024 if large else 256, "max_num_seqs")
        which = ("a GPU of >= 70 GiB, not an A100" if large else "a GPU under 70 GiB or an A100") + (
            "" if device_memory_bytes is not None else "; no device named, a large one assumed")
        # config/vllm.py _set_cudagraph_sizes: max_num_seqs x (1 + speculative tokens) x 2, at most 512 and at
        # most max_num_batched_tokens
        graph = min(seqs * (1 + speculative_tokens) * 2, 512, mbt) if cuda_graphs else 0
        rules = [f"vLLM {VLLM_VERSION}",
                 f"{u}: the engine uses at most that share of each device; weights, the profiled activation "
                 "peak and the CUDA-graph pool come out of it and the rest is the KV cache pool",
                 f"{b}: every KV / latent cache is allocated in pages of {bs} tokens",
                 f"{m}: the memory profile runs one forward of that many tokens (chunked prefill's largest step); "
                 "its activation peak is reserved",
                 f"{s}: at most that many sequences run at once (the OpenAI server's default on {which})",
                 (f"CUDA graphs captured up to a decode batch of {graph} tokens (max_num_seqs x (1 + speculative "
                  f"tokens) x 2, at most 512): that batch's activations are kept"
                  if graph else "CUDA graphs off (--enforce-eager): no graph pool"),
                 "hybrid KV cache manager: sliding-window layers hold ceil(window / block) + 1 pages per sequence, "
                 "Mamba / linear-attention layers one state per sequence",
                 "data parallel with MoE: the expert layers are sharded over all DP x TP ranks (expert parallel "
                 "with --enable-expert-parallel, tensor parallel otherwise)"]
        return Engine("vllm", VLLM_VERSION, bs, util, mbt, seqs, graph, True, "all", rules)
    if name == "sglang":
        default, why = sglang_default_fraction(device_memory_bytes, tp, pp, speculative_tokens > 0)
        frac, f = _chosen(mem_fraction_static, default, "mem_fraction_static")
        rules = [f"SGLang {SGLANG_VERSION}",
                 f"{f}: weights + the KV pool may use that share of each device; activations and CUDA graphs use "
                 "the rest" + ("" if mem_fraction_static is not None else f" ({why})"),
                 "token-level KV pool (page_size 1); MLA's latent + rope key per token per layer, one copy per "
                 "TP rank; sliding-window and Mamba layers in their own pools sized to the window / one state"]
        bs, _ = _chosen(block_size, 1, "page_size")
        return Engine("sglang", SGLANG_VERSION, bs, frac, max_num_batched_tokens, max_num_seqs, 0, True, "static",
                      rules)
    if name == "llamacpp":
        rules = [f"llama.cpp {LLAMACPP_VERSION}",
                 "the context is padded to a multiple of 256 cells; every layer's cache is allocated at n_ctx "
                 "(the full device is usable; no reserve)"]
        return Engine("llamacpp", LLAMACPP_VERSION, 256, 1.0, None, None, 0, False, "all", rules)
    raise EngineError(f"unknown engine {name!r}", hint="one of: vllm, sglang, llamacpp, reference")
