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
              "--framework", "-f", help="Only these: transformers, vllm, sglang, llama.cpp, archprobe.")] = None,
          json_out: JsonOpt = False, no_progress: NoProgressOpt = False, card: CardOpt = None) -> None:
    """Framework adaptation, kept apart from what the weights say.

    Example: archprobe adapt ./Kimi-K3 ; archprobe adapt org/model --json
    """

    from archprobe.adapt.adapt import FRAMEWORKS
    from archprobe.adapt.adapt import adapt as adapt_doc
    from archprobe.errors import ArchprobeError

    bad = [f for f in framework or [] if f not in FRAMEWORKS]
    if bad:
        raise ArchprobeError(f"unknown framework {bad[0]!r}", hint="one of " + ", ".join(FRAMEWORKS))
    with shard_progress(not no_progress and not json_out) as progress:
        doc = adapt_doc(source, progress=progress, only=framework, card=load_card_opt(card))
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
    c.print(styled(doc["note"], "dim"))
