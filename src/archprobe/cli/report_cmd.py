"""`archprobe report [SOURCE] --out report.html`: one self-contained page with everything archprobe knows."""

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
    IndexUrlOpt,
    JsonOpt,
    KvDtypeOpt,
    MemFractionStaticOpt,
    MtpOpt,
    NoProgressOpt,
    OutOpt,
    PpOpt,
    SourceArg,
    TpOpt,
    WeightDtypeOpt,
)
from archprobe.cli.progress import shard_progress


def report(source: SourceArg = None, out: OutOpt = None,
           fmt: Annotated[str, typer.Option("--format", help="html or md.")] = "html",
           context: ContextOpt = "32k", batch: BatchOpt = 1, budget: BudgetOpt = None,
           run_validate: Annotated[bool, typer.Option("--validate", help="Also run `validate` (local "
                                                                          "folders; streams the weights).")] = False,
           validate_json: Annotated[str | None, typer.Option(help="Include an existing `validate --json` "
                                                                  "result instead.")] = None,
           releases: Annotated[bool, typer.Option("--releases", help="Also read released framework versions "
                                                                      "from the package index (see adapt).")] = False,
           index_url: IndexUrlOpt = None,
           observe_json: Annotated[str | None, typer.Option(help="Include an `observe --json` result.")] = None,
           gpu: GpuOpt = None, devices: DevicesOpt = None, tp: TpOpt = None, ep: EpOpt = None, pp: PpOpt = None,
           dp: DpOpt = None, engine: EngineOpt = None, dcp: DcpOpt = None, weight_dtype: WeightDtypeOpt = None,
           kv_dtype: KvDtypeOpt = None, gpu_memory_utilization: GpuMemoryUtilizationOpt = None,
           mem_fraction_static: MemFractionStaticOpt = None, block_size: BlockSizeOpt = None, mtp: MtpOpt = False,
           diff: Annotated[str | None, typer.Option("--diff", help="A second checkpoint: a diff section "
                                                                  "(as `archprobe diff SOURCE B`).")] = None,
           diff_data: Annotated[bool, typer.Option("--diff-data", help="The diff section compares the weights "
                                                                       "(diff --data).")] = False,
           diff_forward: Annotated[bool, typer.Option("--diff-forward", help="The diff section runs both on one "
                                                                             "prompt (diff --forward).")] = False,
           diff_prompt: Annotated[str | None, typer.Option("--diff-prompt", help="--diff-forward's input "
                                                                                 "text.")] = None,
           json_out: JsonOpt = False, no_progress: NoProgressOpt = False, card: CardOpt = None) -> None:
    """Structure, layer plan, parameters, memory curve, adaptation and validation in one page.

    Example: archprobe report ./Kimi-K3 --budget 8x141GB --out k3.html ; archprobe report (the demo)
    """

    from pathlib import Path

    from archprobe.cli import options
    from archprobe.errors import ArchprobeError
    from archprobe.report.collect import collect

    if fmt not in ("html", "md"):
        raise ArchprobeError(f"--format {fmt!r}: html or md")
    context = str(options.tokens(context, "--context"))

    limit = options.budget(budget) if budget else None
    budget = f"{limit[1]}B" if limit else None     # 8x141GB: each device's 141GB on the curve
    if engine:
        from archprobe.memory.engines import ENGINE_NAMES

        engine = options.choice(engine, ENGINE_NAMES, "--engine").lower()
    if gpu:
        from archprobe.memory.devices import device

        device(gpu)
    weight_dtype = options.dtype(weight_dtype, "--weight-dtype")
    kv_dtype = options.dtype(kv_dtype, "--kv-dtype")
    options.finite(gpu_memory_utilization, "--gpu-memory-utilization", 0.01, 1.0)
    options.finite(mem_fraction_static, "--mem-fraction-static", 0.01, 1.0)
    if diff_data or diff_forward or diff_prompt:
        if not diff:
            raise ArchprobeError("--diff-data, --diff-forward and --diff-prompt need --diff B")
        if diff_prompt and not diff_forward:
            raise ArchprobeError("--diff-prompt is --diff-forward's input", hint="add --diff-forward")
    out = options.writable_file(out or f"report.{fmt}", "--out")
    user_card = options.user_card(card)    # read and checked once: the page and the sizing section share it
    with shard_progress(not no_progress and not json_out) as progress:
        data = collect(source, context=context, batch=batch, budget=budget, run_validate=run_validate,
                       validate_json=validate_json, progress=progress, card=user_card,
                       ecosystem=_ecosystem(releases or index_url is not None, index_url),
                       observe_json=observe_json)
    if diff:
        data["diff"] = _diff(data["source"], diff, diff_data, diff_forward, diff_prompt, progress=None)
    if gpu or devices or tp or pp or dp or engine or mtp or (limit and limit[0] > 1):
        from archprobe.memory.sizing import sizing_document

        knobs = dict(gpu_memory_utilization=gpu_memory_utilization, mem_fraction_static=mem_fraction_static,
                     block_size=block_size)
        data["sizing"] = sizing_document(data["inspect"], int(context), batch, gpu=gpu, devices=devices,
                                         budget=limit, tp=tp, ep=ep, pp=pp, dp=dp, dcp=dcp, engine_name=engine,
                                         card=user_card, weight_dtype=weight_dtype, kv_dtype=kv_dtype, mtp=mtp,
                                         engine_opts={k: v for k, v in knobs.items() if v is not None}
                                         if engine in ("vllm", "sglang") else {})
    if fmt == "html":
        from archprobe.report.html import render
    else:
        from archprobe.report.markdown import render
    path = Path(out)
    try:
        path.write_text(render(data))
    except OSError as exc:
        raise ArchprobeError(f"{path}: cannot write the report ({exc.strerror})") from None
    from archprobe.cli.render.report import render_report_written

    emit({**data, "written": str(path)}, json_out, lambda _: render_report_written(path, fmt))


def _diff(a: str, b: str, data: bool, forward: bool, prompt: str | None, progress=None) -> dict:
    """The archprobe.diff/1 document of the report's source against B (diff/headers.py, diff/compare.py)."""
    from archprobe.diff.headers import diff_sources

    doc = diff_sources(a, b, progress=progress)
    if data or forward:
        from archprobe.diff.compare import add_weight_sections

        add_weight_sections(doc, a, b, data=data, forward=forward, prompt=prompt)
    return doc


def _ecosystem(wanted: bool, index_url: str | None):
    if not wanted:
        return None
    from archprobe.adapt.ecosystem import Ecosystem

    return Ecosystem(index_url=index_url)
