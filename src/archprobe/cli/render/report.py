"""Terminal line for `report`: the page is the output; this says where it went."""

from __future__ import annotations

from pathlib import Path

import typer


def render_report_written(path: Path, fmt: str) -> None:
    typer.echo(f"wrote {path} ({path.stat().st_size:,} bytes, {fmt})")
