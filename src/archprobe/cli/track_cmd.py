"""`archprobe track reach|usage|show`: reach and usage signals, snapshotted into the ledger and
plotted apart."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli.errors import one_line
from archprobe.cli.output import emit
from archprobe.cli.params import DEFAULT_LEDGER, IndexUrlOpt, JsonOpt, LedgerOpt, PlotOpt, ReleasesOpt, SubjectOpt

app = typer.Typer(help="Reach signals (hub), usage signals (server metrics) and adaptation signals (framework "
                       "releases, upstream work), kept apart.", no_args_is_help=True)


@app.command("reach")
def reach(repo: Annotated[str, typer.Argument(help="Hub repo id, e.g. moonshotai/Kimi-K3.")],
          mirror: Annotated[list[str] | None, typer.Option(help="A mirror/re-upload repo id (repeatable).")] = None,
          ledger: LedgerOpt = DEFAULT_LEDGER, json_out: JsonOpt = False) -> None:
    """Snapshot hub reach signals (downloads, likes, files, shards, last modified) for a repo and mirrors."""

    from archprobe.eval.ledger import Ledger
    from archprobe.track.reach import hub_reach
    from archprobe.track.store import record

    book = Ledger(ledger)
    snap = {}
    for source in [repo, *(mirror or [])]:
        snap[source] = hub_reach(source)
    at = None
    for source, rows in snap.items():
        at = record(book, "reach", repo, source, rows, at)
    from archprobe.cli.render.track import render_reach

    emit({"schema": "archprobe.track-snapshot/1", "kind": "reach", "subject": repo, "at": at,
          "sources": {s: dict(rows) for s, rows in snap.items()}}, json_out, render_reach)


@app.command("usage")
def usage(url: Annotated[str, typer.Argument(help="An inference server's Prometheus URL, e.g. "
                                                   "http://host:8000/metrics")],
          subject: SubjectOpt,
          ledger: LedgerOpt = DEFAULT_LEDGER, json_out: JsonOpt = False) -> None:
    """Snapshot a vLLM/SGLang server's request and token counters (usage signals)."""

    from archprobe.eval.ledger import Ledger
    from archprobe.track.store import record
    from archprobe.track.usage import scrape

    rows = scrape(url)
    at = record(Ledger(ledger), "usage", subject, url, rows)
    from archprobe.cli.render.track import render_metrics

    emit({"schema": "archprobe.track-snapshot/1", "kind": "usage", "subject": subject, "at": at, "source": url,
          "metrics": [{"metric": m, "value": v, "labels": lab} for m, v, lab in rows]}, json_out, render_metrics)


@app.command("adapt")
def adapt(source: Annotated[str | None, typer.Argument(help="A checkpoint: local folder, hub repo id or GGUF "
                                                            "file; default the demo.")] = None,
          index_url: IndexUrlOpt = None, releases: ReleasesOpt = 10, subject: SubjectOpt = None,
          ledger: LedgerOpt = DEFAULT_LEDGER, json_out: JsonOpt = False) -> None:
    """Snapshot adaptation signals (framework releases that register the architecture, upstream PRs and
    issues): their own kind, never combined with reach or usage."""

    from archprobe.adapt.adapt import adapt as adapt_doc
    from archprobe.adapt.ecosystem import Ecosystem
    from archprobe.errors import ArchprobeError
    from archprobe.eval.ledger import Ledger
    from archprobe.track.adaptation import adaptation_rows
    from archprobe.track.store import record

    if not 1 <= releases <= 1000:
        raise ArchprobeError(f"--releases {releases}: between 1 and 1000")
    doc = adapt_doc(source, only=["transformers", "vllm", "sglang", "llama.cpp", "mlx-lm", "tensorrt-llm"],
                    ecosystem=Ecosystem(index_url=index_url, releases=releases))
    eco = doc.get("ecosystem") or {}
    for warning in eco.get("warnings", []):
        typer.echo(one_line(warning), err=True)
    if eco.get("offline"):
        raise ArchprobeError("nothing recorded: the package index cannot be reached",
                             hint="check --index-url / PIP_INDEX_URL and the network")
    name = subject or source or doc["source"]
    rows = adaptation_rows(doc)
    at = record(Ledger(ledger), "adaptation", name, eco.get("index_url", "index"), rows)
    from archprobe.cli.render.track import render_adaptation

    emit({"schema": "archprobe.track-snapshot/1", "kind": "adaptation", "subject": name, "at": at,
          "source": eco.get("index_url"), "metrics": [{"metric": m, "value": v, "labels": lab} for m, v, lab in rows]},
         json_out, lambda _: render_adaptation(doc))


@app.command("show")
def show(subject: str, ledger: LedgerOpt = DEFAULT_LEDGER,
         plot: PlotOpt = None,
         ratio: Annotated[str | None, typer.Option(help="METRIC_A/METRIC_B, same kind only.")] = None,
         json_out: JsonOpt = False) -> None:
    """Every recorded series for SUBJECT, each in its own panel; reach, usage and adaptation never combined."""

    from archprobe.cli import options
    from archprobe.errors import ArchprobeError
    from archprobe.eval.ledger import Ledger
    from archprobe.track.store import series, subjects

    plot = options.writable_file(plot, "--plot")
    book = Ledger.existing(ledger, read_only=True)
    all_series = series(book, subject)
    if not all_series:
        known = subjects(book)
        hint = ("recorded: " + ", ".join(known)) if known else "run `archprobe track reach` first"
        raise ArchprobeError(f"nothing recorded for {subject!r}", hint=hint)
    derived = None
    if ratio:
        from archprobe.track.ratio import ratio as make_ratio

        derived = make_ratio(all_series, ratio)
    left_out = 0
    if plot:
        from archprobe.track.plot import plot_series, plotted

        drawn = all_series + ([derived] if derived else [])
        plot_series(drawn, plot, subject)
        left_out = plotted(drawn)[1]
        if left_out:
            typer.echo(f"plot: {left_out:,} of {len(drawn):,} series left out (at most {plotted(drawn)[0]} panels)",
                       err=True)
    from archprobe.cli.render.track import render_series

    emit({"schema": "archprobe.track/1", "subject": subject,
          "reach": [s for s in all_series if s["kind"] == "reach"],
          "usage": [s for s in all_series if s["kind"] == "usage"],
          "adaptation": [s for s in all_series if s["kind"] == "adaptation"],
          "ratio": derived, "plot": plot, "plot_series_left_out": left_out}, json_out,
         lambda _: render_series(all_series, derived, plot))

