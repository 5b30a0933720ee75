"""`archprobe inspect [SOURCE]` and `archprobe demo`."""

from __future__ import annotations

import typer

from archprobe.cli.output import emit
from archprobe.cli.params import CardOpt, JsonOpt, NoProgressOpt, SourceArg
from archprobe.cli.progress import shard_progress


def inspect(source: SourceArg = None, json_out: JsonOpt = False, no_progress: NoProgressOpt = False,
            card: CardOpt = None) -> None:
    """What is it? Layers, widths, experts, quantization, parameters and features, from headers only.

    Examples: archprobe inspect ./Kimi-K3 ; archprobe inspect moonshotai/Kimi-K3@main --json
    """

    from archprobe.cli import options
    from archprobe.structure.inspect import inspect_checkpoint

    user_card = options.user_card(card)
    with shard_progress(not no_progress and not json_out) as progress:
        doc = inspect_checkpoint(source, progress=progress, card=user_card)
    from archprobe.cli.render.inspect import render_inspect

    emit(doc, json_out, render_inspect)


def demo(json_out: JsonOpt = False) -> None:
    """Write the embedded K3-shaped demo checkpoint (once, into the cache) and inspect it."""

    from archprobe.cli.render.inspect import render_inspect
    from archprobe.demo import demo_checkpoint
    from archprobe.structure.inspect import inspect_checkpoint

    path = demo_checkpoint()
    doc = inspect_checkpoint(str(path))

    def show(d: dict) -> None:
        typer.echo(f"demo checkpoint: {path}")
        render_inspect(d)

    emit(doc, json_out, show)
