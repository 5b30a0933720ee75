"""`archprobe observe [SOURCE]`: routing, depth, horizons and weight integrity of a model, streamed."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from archprobe.cli._common import CardOpt, JsonOpt, NoProgressOpt, load_card_opt, print_json


def observe(source: Annotated[str | None, typer.Argument(help="Local checkpoint folder or hub repo id; none: the "
                                                              "embedded demo.")] = None,
            prompt_file: Annotated[str | None, typer.Option(help="UTF-8 texts, separated by blank lines "
                                                                 "(default: a built-in sample of prose, code and "
                                                                 "French/German).")] = None,
            prompt_ids: Annotated[str | None, typer.Option(help="Comma-separated input token ids.")] = None,
            weights_only: Annotated[bool, typer.Option("--weights-only", help="Only scan the stored tensors "
                                                                              "(no forward).")] = False,
            no_weights: Annotated[bool, typer.Option("--no-weights", help="Only the forward (no weights "
                                                                          "scan).")] = False,
            card: CardOpt = None,
            dtype: Annotated[str, typer.Option(help="float32 | bfloat16")] = "float32",
            html: Annotated[str | None, typer.Option(help="Write an HTML page with the plots here.")] = None,
            json_out: JsonOpt = False, no_progress: NoProgressOpt = False) -> None:
    """What happens inside: expert routing, the collapse curve, AttnRes weights, memory horizons, and
    NaN / duplicate / outlier tensors.

    Example: archprobe observe ./model --html observe.html
    """
    from archprobe.cli import options
    from archprobe.errors import ArchprobeError

    options.choice(dtype, ("float32", "bfloat16"), "--dtype")
    if prompt_file and prompt_ids:
        raise ArchprobeError("give --prompt-file or --prompt-ids, not both")
    if weights_only and no_weights:
        raise ArchprobeError("--weights-only and --no-weights leave nothing to do")
    ids = options.token_ids(prompt_ids) if prompt_ids else None
    html = options.writable_file(html, "--html")
    user_card = load_card_opt(card)
    texts = None
    if prompt_file:
        from archprobe.observe.sample import read_prompt_file

        texts = read_prompt_file(prompt_file)
    from archprobe.observe import observe as run_observe

    progress = None
    if not json_out and not no_progress and sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import track

        def progress(it):
            return track(it, description="observing", console=Console(stderr=True), transient=True)

    doc = run_observe(source, texts, ids, weights_only=weights_only, weights=not no_weights, card=user_card,
                      dtype=dtype, progress=progress)
    if html:
        from archprobe.report.observe_svg import page

        with open(html, "w", encoding="utf-8") as f:
            f.write(page(doc))
    if json_out:
        print_json(doc)
    else:
        _render(doc)


def _render(doc: dict) -> None:
    from archprobe.cli.textsafe import SafeConsole, line

    c = SafeConsole()
    w = doc.get("weights")
    head = f"{doc['source']}: {doc['tokens']} tokens"
    if w:
        head += f", {w['tensors']} tensors scanned"
    c.print(line((head, "bold")))
    if doc.get("forward", {}).get("status") == "unsupported":
        c.print(line("  forward: ", (doc["forward"]["reason"], "yellow")))
    for f in doc.get("findings", []):
        c.print(line("  ", (f["severity"], "red" if f["severity"] == "warning" else "cyan"), ": ", f["message"]))
    if not doc.get("findings"):
        c.print("  nothing unusual found")
    if doc["routing"]:
        c.print("routing (layer: imbalance, entropy/max, top-1 repeat vs random, top-k overlap vs random, "
                "distinct experts per 16 tokens; LatentMoE: the same routed on the other space, router mapped "
                "by least squares)")
        for r in doc["routing"]:
            c.print(f"  {r['layer']:>3}: {r['imbalance']:.2f}  {r['entropy']:.2f}/{r['entropy_max']:.2f}  "
                    f"{_pct(r['top1_repeat'])} vs {_pct(r['random']['top1_repeat'])}  "
                    f"{_pct(r['topk_overlap'])} vs {_pct(r['random']['topk_overlap'])}  "
                    f"{r['distinct_per_block'] or 0:.1f}")
            o = r.get("other_space") or {}
            if o.get("available"):
                c.print(f"       {o['space']} (LS): {o['imbalance']:.2f}  {o['entropy']:.2f}  "
                        f"{_pct(o['top1_repeat'])}  {_pct(o['topk_overlap'])}  {o['distinct_per_block'] or 0:.1f}"
                        f"  same set {_pct(o['same_choice_share'])}")
    if doc["depth"]:
        c.print("depth (layer: cos(in, out), |update|/|stream|, max |x|)")
        for d in doc["depth"]:
            c.print(f"  {d['layer']:>3}: {d.get('cosine_in_out', float('nan')):.3f}  "
                    f"{d.get('update_ratio', float('nan')):.3g}  {d['massive']['max_abs']:.4g}")
    if doc["horizons"]:
        spans = [h["tokens"] for h in doc["horizons"] if h["tokens"] is not None]
        if spans:
            c.print(f"memory horizons (half-life ln 2 / -g, g the mean log-decay per step): "
                    f"{len(doc['horizons'])} heads, {min(spans):.3g} to {max(spans):.3g} tokens")
    for g in doc.get("gates", []):
        c.print(f"layer {g['layer']} {g['kind']}: keeps {_pct(g['share_kept'])}"
                + (f" of causal KV entries (top-{g['topk']})" if g["kind"] == "indexer" else " of heads"))
    for m in doc.get("mla", []):
        c.print(f"MLA layer {m['layer']}: kv up-projection uses rank {m['rank_99']} of {m['rank']} (99% energy)")


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"
