"""Terminal line for `card -o`: what was written."""

from __future__ import annotations

import typer


def render_card_written(doc: dict) -> None:
    """One line: where the card went and what in it still needs a person."""
    unknown = doc["unknown_fields"]
    typer.echo(f"wrote {doc['written']}: {doc['layers']} layers, {doc['tensors']:,} tensor roles, "
               f"{doc['unexplained']} unexplained, {len(unknown)} unknown field(s)"
               + (f" ({', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''})" if unknown else ""))
