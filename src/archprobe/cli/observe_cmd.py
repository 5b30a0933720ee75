"""`archprobe observe [SOURCE]`: routing, depth, horizons and weight integrity of a model, streamed."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli.output import emit
from archprobe.cli.params import CardOpt, DtypeOpt, HtmlOpt, JsonOpt, NoProgressOpt, PromptFileOpt, PromptIdsOpt
from archprobe.cli.progress import item_progress


def observe(source: Annotated[str | None, typer.Argument(help="Local checkpoint folder or hub repo id; none: the "
                                                              "embedded demo.")] = None,
            prompt_file: PromptFileOpt = None, prompt_ids: PromptIdsOpt = None,
            weights_only: Annotated[bool, typer.Option("--weights-only", help="Only scan the stored tensors "
                                                                              "(no forward).")] = False,
            no_weights: Annotated[bool, typer.Option("--no-weights", help="Only the forward (no weights "
                                                                          "scan).")] = False,
            card: CardOpt = None,
            dtype: DtypeOpt = "float32", html: HtmlOpt = None,
            json_out: JsonOpt = False, no_progress: NoProgressOpt = False) -> None:
    """What happens inside: expert routing, the collapse curve, AttnRes weights, memory horizons, and
    NaN / duplicate / outlier tensors.

    Example: archprobe observe ./model --html observe.html
    """
    from archprobe.cli import options
    from archprobe.errors import ArchprobeError

    options.choice(dtype, ("float32", "bfloat16"), "--dtype")
    if prompt_file and prompt_ids:
        raise ArchprobeError("give --prompt-file or --prompt-ids, not both")
    if weights_only and no_weights:
        raise ArchprobeError("--weights-only and --no-weights leave nothing to do")
    ids = options.token_ids(prompt_ids) if prompt_ids else None
    html = options.writable_file(html, "--html")
    user_card = options.user_card(card)
    texts = None
    if prompt_file:
        from archprobe.observe.sample import read_prompt_file

        texts = read_prompt_file(prompt_file)
    from archprobe.observe import observe as run_observe

    doc = run_observe(source, texts, ids, weights_only=weights_only, weights=not no_weights, card=user_card,
                      dtype=dtype, progress=item_progress(not json_out and not no_progress, "observing"))
    if html:
        from archprobe.report.observe_svg import page

        with open(html, "w", encoding="utf-8") as f:
            f.write(page(doc))
    from archprobe.cli.render.observe import render_observe

    emit(doc, json_out, render_observe)

