"""Terminal lines for `track`: one per snapshot row or recorded series, each kind on its own."""

from __future__ import annotations

import typer

from archprobe.cli.errors import one_line


def render_reach(doc: dict) -> None:
    for s, rows in doc["sources"].items():
        typer.echo(one_line(f"reach {s}: " + ", ".join(f"{k} {v:,.0f}" for k, v in rows.items())))


def render_metrics(doc: dict) -> None:
    """A usage snapshot: one line per counter."""
    for m in doc["metrics"]:
        typer.echo(one_line(f"{doc['kind']} {m['metric']}{m['labels'] or ''}: {m['value']:,.0f}"))


def render_adaptation(adapt_doc: dict) -> None:
    """An adaptation snapshot, read from the adapt document it came from (per framework, not per row)."""
    for f in adapt_doc["frameworks"]:
        if f.get("releases"):
            knowing = [r["version"] for r in f["releases"] if r["status"] == "registered"]
            typer.echo(one_line(f"adaptation {f['framework']}: {len(knowing)} of {len(f['releases'])} release(s) "
                                f"read register it; first: {f.get('first_release_known') or 'none'}; "
                                f"{len(f.get('upstream') or [])} upstream PR(s)/issue(s)"))


def render_series(all_series: list[dict], derived: dict | None, plot: str | None) -> None:
    for s in all_series:
        last = s["points"][-1][1]
        typer.echo(one_line(f"{s['kind']:5}  {s['source']}  {s['metric']}{s['labels'] or ''}: {len(s['points'])} "
                            f"snapshot(s), latest {last:,.0f}"))
    if derived:
        typer.echo(one_line(f"ratio {derived['metric']}: " + ", ".join(f"{v:.3g}" for _, v in derived["points"])))
    if plot:
        typer.echo(f"plot: {plot}")
