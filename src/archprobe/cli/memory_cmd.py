"""`archprobe memory [SOURCE] --context N --batch B`: peak memory per layer type; sweeps and a plot; sizing on
named devices (`--gpu h200 --devices 16`, `--budget 8x141GB`), layouts (`--tp --ep --pp --dp --dcp`), engines
(`--engine vllm`) and design trade-offs (`--tradeoffs`)."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli.output import emit
from archprobe.cli.params import (
    BatchOpt,
    BlockSizeOpt,
    BudgetOpt,
    CardOpt,
    ContextOpt,
    DcpOpt,
    DevicesOpt,
    DpOpt,
    EngineOpt,
    EpOpt,
    GpuMemoryUtilizationOpt,
    GpuOpt,
    JsonOpt,
    KvDtypeOpt,
    MemFractionStaticOpt,
    MtpOpt,
    NoProgressOpt,
    PlotOpt,
    PpOpt,
    SourceArg,
    TpOpt,
    WeightDtypeOpt,
)
from archprobe.cli.progress import shard_progress


def memory(source: SourceArg = None, context: ContextOpt = "4k", batch: BatchOpt = 1,
           weight_dtype: WeightDtypeOpt = None, kv_dtype: KvDtypeOpt = None, gpu: GpuOpt = None,
           devices: DevicesOpt = None, tp: TpOpt = None, ep: EpOpt = None, pp: PpOpt = None, dp: DpOpt = None,
           dcp: DcpOpt = None,
           pp_layers: Annotated[str | None, typer.Option(help="Uneven stages: layers per stage, e.g. 24,23,23,23.")
                                ] = None,
           engine: EngineOpt = None, gpu_memory_utilization: GpuMemoryUtilizationOpt = None,
           block_size: BlockSizeOpt = None,
           max_num_batched_tokens: Annotated[int | None, typer.Option(min=1, max=1 << 30)] = None,
           max_num_seqs: Annotated[int | None, typer.Option(min=1, max=1 << 24)] = None,
           mem_fraction_static: MemFractionStaticOpt = None,
           enforce_eager: Annotated[bool, typer.Option(help="vLLM without CUDA graphs.")] = False,
           mtp: MtpOpt = False,
           draft: Annotated[str | None, typer.Option(help="A draft model (folder or file) for speculative decoding: "
                                                          "its weights and cache are added, MTP layers left out.")
                            ] = None,
           speculative_tokens: Annotated[int | None, typer.Option(
               min=1, max=64, help="Draft tokens per step (default: the MTP layer count, else 1).")] = None,
           chunk: Annotated[int | None, typer.Option(min=1, max=1 << 40,
                                                      help="Prefill chunk in tokens (default 2048).")] = None,
           sweep: Annotated[str | None, typer.Option(help="Comma-separated contexts, e.g. 4k,32k,128k,1M.")] = None,
           plot: PlotOpt = None, budget: BudgetOpt = None,
           tradeoffs: Annotated[bool, typer.Option(help="Design trade-offs from the card (LatentMoE, MLA, KDA, "
                                                        "AttnRes): formula, numbers, break-even.")] = False,
           list_gpus: Annotated[bool, typer.Option(help="List the named devices with their sources.")] = False,
    json_out: JsonOpt = False, no_progress: NoProgressOpt = False, card: CardOpt = None) -> None:
    """Will it fit? Weights + caches + activations at a context length, per layer type and per device.

    Examples: archprobe memory ./Kimi-K3 --context 128k --batch 4 ;
    archprobe memory ./Kimi-K3 --gpu h200 --engine vllm (how many H200s) ;
    archprobe memory ./model --sweep 4k,32k,128k,1M --plot mem.png --budget 8x141GB
    """

    from archprobe.cli import options
    from archprobe.memory.engines import ENGINE_NAMES
    from archprobe.memory.sizing import sizing_document
    from archprobe.structure.checkpoint import open_checkpoint
    from archprobe.structure.inspect import document

    if list_gpus:
        return _list_gpus(json_out)
    # every option checked before the checkpoint is read (cli/options.py)
    contexts = options.token_list(sweep, "--sweep") if sweep else [options.tokens(context, "--context")]
    limit = options.budget(budget) if budget else None
    weight_dtype = options.dtype(weight_dtype, "--weight-dtype")
    kv_dtype = options.dtype(kv_dtype, "--kv-dtype")
    engine = options.choice(engine, [*ENGINE_NAMES, "reference"], "--engine")
    engine = engine.lower() if engine else None
    options.finite(gpu_memory_utilization, "--gpu-memory-utilization", 0.01, 1.0)
    options.finite(mem_fraction_static, "--mem-fraction-static", 0.01, 1.0)
    layers = options.token_list(pp_layers, "--pp-layers") if pp_layers else None
    if gpu:
        from archprobe.memory.devices import device

        device(gpu)                                   # an unknown name fails before the checkpoint is read
    plot = options.writable_file(plot, "--plot")
    user_card = options.user_card(card)
    with shard_progress(not no_progress and not json_out) as progress:
        ck = open_checkpoint(source, user_card, progress)
    doc = document(ck.raw, ck.derived)
    draft_ck = open_checkpoint(draft) if draft else None
    draft_doc = document(draft_ck.raw, draft_ck.derived) if draft_ck else None
    engine_opts = {k: v for k, v in dict(gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
                                         max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                                         mem_fraction_static=mem_fraction_static).items() if v is not None}
    if enforce_eager:
        engine_opts["cuda_graphs"] = False
    if engine not in ("vllm", "sglang"):
        engine_opts = {}
    opts = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype, gpu=gpu, devices=devices, budget=limit, tp=tp, ep=ep,
                pp=pp, dp=dp, dcp=dcp, pp_layers=layers, engine_name=engine, engine_opts=engine_opts, mtp=mtp,
                chunk=chunk, draft_doc=draft_doc, speculative_tokens=speculative_tokens)
    plans = [sizing_document(doc, c, batch, **opts) for c in contexts]
    if tradeoffs:
        from archprobe.memory.tradeoffs import tradeoffs as compute_tradeoffs

        rows = compute_tradeoffs(doc, contexts[-1], batch)
        for p in plans:
            p["tradeoffs"] = rows
    if plot:
        from archprobe.memory.plot import plot_sweep

        plot_sweep(plots_for(doc, contexts, batch, opts), plot, doc.get("model_type", ""))
    from archprobe.cli.render.memory import render_memory

    emit(plans[0] if len(plans) == 1 else {"schema": "archprobe.memory-sweep/1", "plans": plans}, json_out,
         lambda _: render_memory(plans, plot))


def _list_gpus(json_out: bool) -> None:
    from archprobe.cli.render.memory import render_devices
    from archprobe.memory.devices import DEVICES

    emit({"schema": "archprobe.devices/1", "devices": [d.to_dict() for d in DEVICES.values()]}, json_out,
         lambda _: render_devices(list(DEVICES.values())))


def plots_for(doc, contexts, batch, opts):
    """Plans on a grid of contexts (at least 16 points, from 1/64 of a single context up), all on the layout the
    largest context was sized on."""
    from archprobe.memory.sizing import sizing_document

    lo, hi = min(contexts), max(contexts)
    if lo == hi:
        lo = max(1, hi // 64)
    last = sizing_document(doc, hi, batch, **opts)
    fixed = dict(opts)
    if not (opts.get("tp") or opts.get("pp") or opts.get("dp")):
        lay = last["layout"]
        fixed.update(devices=last["devices"], tp=lay["tp"], pp=lay["pp"], dp=lay["dp"])
    grid = contexts if len(contexts) >= 4 else sorted({*contexts, *[int(lo * (hi / lo) ** (i / 15))
                                                                    for i in range(16)]})
    return [sizing_document(doc, c, batch, **fixed) for c in grid]
