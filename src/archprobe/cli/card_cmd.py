"""`archprobe card [SOURCE] -o card.yaml`: the architecture card, to read, correct and hand back with --card."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli._common import CardOpt, JsonOpt, NoProgressOpt, load_card_opt, print_json, shard_progress
from archprobe.cli.inspect_cmd import SourceArg


def card(source: SourceArg = None,
         out: Annotated[str | None, typer.Option("--out", "-o", help="Write the card here (.yaml/.yml or .json); "
                                                                      "default: print YAML.")] = None,
         json_out: JsonOpt = False, no_progress: NoProgressOpt = False, card_in: CardOpt = None) -> None:
    """The model as data: every layer's mixer, FFN, norms and residual, every tensor's role, each field's origin.

    Examples: archprobe card ./model -o card.yaml ; (edit a guess, e.g. router.scoring: softmax) ;
    archprobe memory ./model --card card.yaml ; archprobe card ./model --card card.yaml (checks an edited card)
    """

    from pathlib import Path

    from archprobe.cli import options
    from archprobe.errors import ArchprobeError
    from archprobe.structure.checkpoint import open_checkpoint

    out = options.writable_file(out, "--out") if out else None
    user = load_card_opt(card_in)
    with shard_progress(not no_progress and not json_out) as progress:
        c = open_checkpoint(source, user, progress).card
    text = c.to_json() if (out and str(out).endswith(".json")) or (json_out and not out) else c.to_yaml()
    if out:
        path = Path(out)
        try:
            path.write_text(text)
        except OSError as exc:
            raise ArchprobeError(f"{path}: cannot write the card ({exc.strerror})") from None
        if json_out:
            print_json({"schema": "archprobe.card-written/1", "written": str(path), "layers": len(c.layers),
                        "tensors": len(c.tensors), "unexplained": len(c.unexplained),
                        "unknown_fields": c.unknown_fields()})
        else:
            unknown = c.unknown_fields()
            typer.echo(f"wrote {path}: {len(c.layers)} layers, {len(c.tensors):,} tensor roles, "
                       f"{len(c.unexplained)} unexplained, {len(unknown)} unknown field(s)"
                       + (f" ({', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''})" if unknown else ""))
        return
    if json_out:
        print_json(c.to_dict())
    else:
        typer.echo(text, nl=False)
