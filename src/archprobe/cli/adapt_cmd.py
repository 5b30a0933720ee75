"""`archprobe adapt [SOURCE]`: which frameworks can run this checkpoint, and which features each lacks."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli.output import emit
from archprobe.cli.params import CardOpt, IndexUrlOpt, JsonOpt, NoProgressOpt, ReleasesOpt, SourceArg
from archprobe.cli.progress import shard_progress


def adapt(source: SourceArg = None,
          framework: Annotated[list[str] | None, typer.Option(
              "--framework", "-f", help="Only these: transformers, vllm, sglang, llama.cpp, archprobe, mlx-lm, "
                                        "tensorrt-llm.")] = None,
          index_url: IndexUrlOpt = None,
          releases: ReleasesOpt = 10,
          offline: Annotated[bool, typer.Option(
              "--offline", help="Only the installed packages: no index, no forge.")] = False,
          upstream: Annotated[bool, typer.Option(
              "--upstream/--no-upstream", help="Search the forge ($GITHUB_API_URL, $GITHUB_TOKEN) for pull "
                                               "requests and issues.")] = True,
          json_out: JsonOpt = False, no_progress: NoProgressOpt = False, card: CardOpt = None) -> None:
    """Framework adaptation, kept apart from what the weights say: installed packages, released versions
    on the package index (read by HTTP Range, nothing installed) and work in progress upstream.

    Example: archprobe adapt ./Kimi-K3 ; archprobe adapt org/model --json ; archprobe adapt --offline
    """

    from archprobe.adapt.adapt import FRAMEWORKS
    from archprobe.adapt.adapt import adapt as adapt_doc
    from archprobe.cli import options
    from archprobe.cli.errors import one_line
    from archprobe.cli.render.adapt import render_adapt
    from archprobe.errors import ArchprobeError

    bad = [f for f in framework or [] if f not in FRAMEWORKS]
    if bad:
        raise ArchprobeError(f"unknown framework {bad[0]!r}", hint="one of " + ", ".join(FRAMEWORKS))
    if not 1 <= releases <= 1000:
        raise ArchprobeError(f"--releases {releases}: between 1 and 1000")
    eco = None
    if not offline:
        from archprobe.adapt.ecosystem import Ecosystem

        eco = Ecosystem(index_url=index_url, releases=releases, upstream=upstream)
    show = not no_progress and not json_out
    with shard_progress(show) as progress, shard_progress(show and not offline, "reading releases") as rp:
        doc = adapt_doc(source, progress=progress, only=framework, card=options.user_card(card), ecosystem=eco,
                        release_progress=rp)
    for warning in (doc.get("ecosystem") or {}).get("warnings", []):
        typer.echo(one_line(warning), err=True)
    emit(doc, json_out, render_adapt)
