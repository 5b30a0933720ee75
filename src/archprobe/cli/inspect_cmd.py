"""`archprobe inspect [SOURCE]` and `archprobe demo`."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli._common import CardOpt, JsonOpt, NoProgressOpt, load_card_opt, print_json, shard_progress

SourceArg = Annotated[str | None, typer.Argument(
    help="Local folder, .safetensors/.gguf file, or hub repo id org/name[@revision][:GGUF_TAG] "
         "(the tag picks one GGUF model of a repo that holds several, e.g. :Q4_K_M). "
         "Omitted: the embedded demo checkpoint.", show_default=False)]


def inspect(source: SourceArg = None, json_out: JsonOpt = False, no_progress: NoProgressOpt = False,
            card: CardOpt = None) -> None:
    """What is it? Layers, widths, experts, quantization, parameters and features, from headers only.

    Examples: archprobe inspect ./Kimi-K3 ; archprobe inspect moonshotai/Kimi-K3@main --json
    """

    from archprobe.structure.inspect import inspect_checkpoint

    user_card = load_card_opt(card)
    with shard_progress(not no_progress and not json_out) as progress:
        doc = inspect_checkpoint(source, progress=progress, card=user_card)
    if json_out:
        print_json(doc)
    else:
        from archprobe.cli.render import render_inspect

        render_inspect(doc)



def demo(json_out: JsonOpt = False) -> None:
    """Write the embedded K3-shaped demo checkpoint (once, into the cache) and inspect it."""

    from archprobe.demo import demo_checkpoint
    from archprobe.structure.inspect import inspect_checkpoint

    path = demo_checkpoint()
    doc = inspect_checkpoint(str(path))
    if json_out:
        print_json(doc)
        return
    from archprobe.cli.render import render_inspect

    typer.echo(f"demo checkpoint: {path}")
    render_inspect(doc)

