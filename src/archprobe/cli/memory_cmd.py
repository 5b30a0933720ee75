"""`archprobe memory [SOURCE] --context N --batch B`: peak memory per layer type; sweeps and a plot."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli._common import CardOpt, JsonOpt, NoProgressOpt, load_card_opt, print_json, shard_progress
from archprobe.cli.inspect_cmd import SourceArg


def memory(source: SourceArg = None,
           context: Annotated[str, typer.Option("--context", "-c", help="Context length: 4096, 32k, 1M.")] = "4k",
           batch: Annotated[int, typer.Option("--batch", "-b", min=1, max=1 << 24, help="Concurrent sequences.")] = 1,
           weight_dtype: Annotated[str | None, typer.Option(
               help="Re-plan weights at this precision (bf16, fp8, mxfp4, ...); default: as stored.")] = None,
           kv_dtype: Annotated[str | None, typer.Option(help="KV/latent cache dtype (bf16, fp8); default: the "
                                                             "checkpoint's float dtype.")] = None,
           devices: Annotated[int, typer.Option(min=1, max=1 << 20,
                                                help="Split across N devices (tensor/expert parallel).")] = 1,
           engine: Annotated[str | None, typer.Option(help="Engine rule: vllm (16-token blocks), llamacpp "
                                                           "(256-cell padding), reference (eager).")] = None,
           chunk: Annotated[int | None, typer.Option(min=1, max=1 << 40,
                                                      help="Prefill chunk in tokens (default 2048).")] = None,
           sweep: Annotated[str | None, typer.Option(help="Comma-separated contexts, e.g. 4k,32k,128k,1M.")] = None,
           plot: Annotated[str | None, typer.Option(help="Write memory vs context per layer type to this PNG.")] = None,
           budget: Annotated[str | None, typer.Option(help="Device memory, e.g. 80GB: draws the line and "
                                                           "reports the largest context that fits.")] = None,
           json_out: JsonOpt = False, no_progress: NoProgressOpt = False, card: CardOpt = None) -> None:
    """Will it fit? Weights + caches + activations at a context length, per layer type.

    Examples: archprobe memory ./Kimi-K3 --context 128k --batch 4 ;
    archprobe memory ./model --sweep 4k,32k,128k,1M --plot mem.png --budget 80GB
    """

    from archprobe.cli import options
    from archprobe.memory.plan import ENGINES, largest_fitting_context, plan_memory
    from archprobe.structure.inspect import inspect_checkpoint

    # every option checked before the checkpoint is read (cli/options.py)
    contexts = options.token_list(sweep, "--sweep") if sweep else [options.tokens(context, "--context")]
    limit = options.size(budget, "--budget") if budget else None
    weight_dtype = options.dtype(weight_dtype, "--weight-dtype")
    kv_dtype = options.dtype(kv_dtype, "--kv-dtype")
    engine = options.choice(engine, [e for e in ENGINES if e], "--engine")
    engine = engine.lower() if engine else None
    plot = options.writable_file(plot, "--plot")
    user_card = load_card_opt(card)
    with shard_progress(not no_progress and not json_out) as progress:
        doc = inspect_checkpoint(source, progress=progress, card=user_card)
    opts = dict(batch=batch, weight_dtype=weight_dtype, kv_dtype=kv_dtype, devices=devices, engine=engine,
                chunk=chunk)
    plans = [plan_memory(doc, c, **opts) for c in contexts]
    fits = largest_fitting_context(doc, limit, **opts) if limit else None
    if plot:
        from archprobe.memory.plot import plot_sweep

        plot_sweep(plots_for(doc, contexts, opts), plot, limit, doc.get("model_type", ""), devices)
    if json_out:
        out = plans[0] if len(plans) == 1 else {"schema": "archprobe.memory-sweep/1", "plans": plans}
        if limit is not None:
            out = {**out, "budget_bytes": limit, "largest_fitting_context": fits}
        print_json(out)
        return
    from archprobe.cli.render_memory import render_memory

    render_memory(plans, limit, fits, plot)



def plots_for(doc, contexts, opts):
    from archprobe.memory.plan import plan_memory

    if len(contexts) >= 4:
        return [plan_memory(doc, c, **opts) for c in contexts]
    lo, hi = min(contexts), max(contexts)
    grid = sorted({*contexts, *[int(lo * (hi / lo) ** (i / 15)) for i in range(16)]}) if hi > lo else contexts
    return [plan_memory(doc, c, **opts) for c in grid]
