"""`archprobe adapt [SOURCE]`: which frameworks can run this checkpoint, and which features each lacks."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli._common import CardOpt, JsonOpt, NoProgressOpt, load_card_opt, print_json, shard_progress
from archprobe.cli.inspect_cmd import SourceArg

STYLE = {"supported": "green", "handled": "green", "missing": "red", "unverified": "yellow", "unknown": "red",
         "not installed": "dim", "architecture known but feature missing": "yellow",
         "architecture known, features unverified": "yellow"}


def adapt(source: SourceArg = None,
          framework: Annotated[list[str] | None, typer.Option(
              "--framework", "-f", help="Only these: transformers, vllm, sglang, llama.cpp, archprobe, mlx-lm, "
                                        "tensorrt-llm.")] = None,
          index_url: Annotated[str | None, typer.Option(
              "--index-url", help="Package index (PEP 503/691) to read released wheels from; default "
                                  "$PIP_INDEX_URL or https://pypi.org/simple.", show_default=False)] = None,
          releases: Annotated[int, typer.Option(
              "--releases", help="Newest releases read per framework (older ones only to find the first "
                                 "that registered it).")] = 10,
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
        doc = adapt_doc(source, progress=progress, only=framework, card=load_card_opt(card), ecosystem=eco,
                        release_progress=rp)
    for warning in (doc.get("ecosystem") or {}).get("warnings", []):
        from archprobe.cli.errors import one_line

        typer.echo(one_line(warning), err=True)
    if json_out:
        print_json(doc)
        return
    render_adapt(doc)



def render_adapt(doc: dict) -> None:
    from rich.table import Table

    from archprobe.cli.textsafe import SafeConsole, line, styled

    c = SafeConsole()
    declared = doc.get("wrapper_model_type") or doc["model_type"]
    c.print(line((declared, "bold"), f" ({', '.join(doc['architectures'] or [])}) — {len(doc['features'])} "
                                     "detected features"))
    t = Table("framework", "version", "status", "known as", "missing")
    for r in doc["frameworks"]:
        st = r["status"]
        t.add_row(r["framework"], r["version"] or "", styled(st, STYLE.get(st, "white")), r["known_as"] or "",
                  ", ".join(r["missing"]))
    c.print(t)
    installed = [r for r in doc["frameworks"] if r["installed"] and r["features"]]
    if installed:
        m = Table("feature", *[r["framework"] for r in installed])
        for fid in doc["features"]:
            m.add_row(fid, *[styled(s, STYLE.get(s, "white")) for s in
                             (doc["matrix"][fid][r["framework"]] for r in installed)])
        c.print(m)
    for r in doc["frameworks"]:
        for row in r["features"]:
            if row["status"] != "handled":
                c.print(f"  {r['framework']}: {row['feature']} {row['status']}: {row['why']}")
        for note in r["notes"]:
            c.print(styled(f"  {r['framework']}: {note}", "dim"))
    render_releases(c, doc)
    c.print(styled(doc["note"], "dim"))


def render_releases(c, doc: dict) -> None:
    """Per framework: releases x status x features, the first release that knows it, and upstream work."""
    from rich.table import Table

    from archprobe.cli.textsafe import styled

    for r in doc["frameworks"]:
        rel = r.get("releases") or []
        if rel:
            t = Table(f"{r['framework']} release", "status", "known as", "features handled", "missing", "bytes read",
                      title=f"{r['framework']}: first release that knows it: {r.get('first_release_known') or 'none'}")
            for x in rel:
                share = f"{x['bytes_fetched']:,}" + (f" of {x['file_bytes']:,}" if x["file_bytes"] else "")
                total = len(x["handled"]) + len(x["missing"]) + len(x["unverified"])
                t.add_row(x["version"], x["status"], x["known_as"] or "", f"{len(x['handled'])} of {total}",
                          ", ".join(x["missing"]), share)
            c.print(t)
        for u in (r.get("upstream") or [])[:10]:
            state = "merged" if u["merged"] else ("draft" if u["draft"] and u["state"] == "open" else u["state"])
            c.print(styled(f"  {u['repo']}#{u['number']} {u['kind']} {state} {u['updated_at'][:10]}: {u['title']}",
                           "dim"))
