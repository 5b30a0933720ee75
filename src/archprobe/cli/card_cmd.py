"""`archprobe card [SOURCE] -o card.yaml`: the architecture card, to read, correct and hand back with --card."""

from __future__ import annotations

import typer

from archprobe.cli.output import emit
from archprobe.cli.params import CardOpt, JsonOpt, NoProgressOpt, OutOpt, SourceArg
from archprobe.cli.progress import shard_progress


def card(source: SourceArg = None, out: OutOpt = None, json_out: JsonOpt = False, no_progress: NoProgressOpt = False,
         card_in: CardOpt = None) -> None:
    """The model as data: every layer's mixer, FFN, norms and residual, every tensor's role, each field's origin.

    Examples: archprobe card ./model -o card.yaml ; (edit a guess, e.g. router.scoring: softmax) ;
    archprobe memory ./model --card card.yaml ; archprobe card ./model --card card.yaml (checks an edited card)
    """

    from pathlib import Path

    from archprobe.cli import options
    from archprobe.cli.render.card import render_card_written
    from archprobe.errors import ArchprobeError
    from archprobe.structure.checkpoint import open_checkpoint

    out = options.writable_file(out, "--out") if out else None
    user = options.user_card(card_in)
    with shard_progress(not no_progress and not json_out) as progress:
        c = open_checkpoint(source, user, progress).card
    text = c.to_json() if (out and str(out).endswith(".json")) or (json_out and not out) else c.to_yaml()
    if not out:
        emit(c.to_dict(), json_out, lambda _: typer.echo(text, nl=False))
        return
    path = Path(out)
    try:
        path.write_text(text)
    except OSError as exc:
        raise ArchprobeError(f"{path}: cannot write the card ({exc.strerror})") from None
    emit({"schema": "archprobe.card-written/1", "written": str(path), "layers": len(c.layers),
          "tensors": len(c.tensors), "unexplained": len(c.unexplained), "unknown_fields": c.unknown_fields()},
         json_out, render_card_written)
