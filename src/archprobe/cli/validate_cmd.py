"""`archprobe validate SOURCE`: a streamed forward pass through archprobe.nn, checked against a reference."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli.output import emit
from archprobe.cli.params import CardOpt, DtypeOpt, JsonOpt, PromptIdsOpt, PromptOpt
from archprobe.cli.progress import item_progress


def validate(source: Annotated[str, typer.Argument(help="Local checkpoint folder (config.json + safetensors) or .gguf "
                                                       "file, or a hub repo id (only the needed shards are "
                                                       "downloaded; org/name:TAG picks a GGUF model, sha256-checked)."
                                                  )],
             prompt_ids: PromptIdsOpt = None, prompt: PromptOpt = None,
             reference: Annotated[str, typer.Option(help="transformers | none")] = "none",
             dtype: DtypeOpt = "float32",
             layers: Annotated[str | None, typer.Option(help="Run only layers 0-N, e.g. 0-3.")] = None,
             save_logits: Annotated[str | None, typer.Option(help="Write the final logits (safetensors, "
                                                                  "tensor 'logits').")] = None,
             pin_routing: Annotated[bool, typer.Option(help="MoE blocks choose experts from the reference's "
                                                            "block input (no false routing flips).")] = False,
             offload_dir: Annotated[str | None, typer.Option(help="Keep each layer's output on disk here "
                                                                  "(long prompts).")] = None,
             card: CardOpt = None,
             generate: Annotated[int, typer.Option(help="Also decode N tokens greedily (ours with the caches, "
                                                        "and the reference's).")] = 0,
             json_out: JsonOpt = False) -> None:
    """Does our understanding hold? Per-layer statistics and final-logit agreement.

    Example: archprobe validate ./tiny-kimi --reference transformers --prompt-ids 1,2,3,4
    """

    from archprobe.cli import options
    from archprobe.errors import ArchprobeError

    if reference not in ("none", "transformers"):
        raise ArchprobeError(f"--reference {reference!r}: use transformers or none")
    options.choice(dtype, ("float32", "bfloat16"), "--dtype")
    ids = None
    if prompt_ids and prompt:
        raise ArchprobeError("give --prompt or --prompt-ids, not both")
    if prompt_ids:
        ids = options.token_ids(prompt_ids)
    # outputs checked before the (long) run, not after it
    save_logits = options.writable_file(save_logits, "--save-logits")
    offload_dir = options.writable_folder(offload_dir, "--offload-dir")
    user_card = options.user_card(card)
    from archprobe.validate import validate as run_validate  # torch: a missing extra is one line (cli/errors.py)

    doc = run_validate(source, ids, reference, dtype, layers, save_logits,
                       progress=item_progress(not json_out, "layers"), prompt=prompt,
                       pin_routing=pin_routing, offload_dir=offload_dir, card=user_card, generate=generate)
    from archprobe.cli.render.validate import render_validate

    emit(doc, json_out, render_validate)
    if doc["status"] == "fail":
        raise typer.Exit(1)

