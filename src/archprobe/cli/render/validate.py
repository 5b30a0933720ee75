"""Terminal rendering of the validate document: status, per-layer rows, the reference, next tokens."""

from __future__ import annotations

from rich.table import Table

from archprobe.cli.textsafe import SafeConsole, line


def render_validate(doc: dict) -> None:
    from archprobe.validate.status import meaning

    c = SafeConsole()
    c.print(line((f"status: {doc['status']}", "bold"), f"  ({meaning(doc['status'])})"))
    c.print(f"  mapped {doc['mapped_tensors']} tensors, unmapped {len(doc['unmapped_tensors'])}, "
            f"peak RSS {doc['peak_rss_bytes'] / 2**20:.0f} MiB")
    for r in doc.get("reasons", []):
        c.print(line("  ", (r, "yellow")))
    for a in doc.get("assumptions", []):
        c.print(line("  ", (a, "yellow")))
    for m in doc["missing_tensors"]:
        c.print(line("  ", (m, "red")))
    t = Table()
    for col in ("layer", "kind", "out rms", "max |x|", "finite", "seconds"):
        t.add_column(col, justify="right")
    for layer in doc["layers"]:
        t.add_row(str(layer["index"]), layer["kind"], f"{layer['out_rms']:.4g}", f"{layer['max_abs']:.4g}",
                  str(layer["finite"]), f"{layer['seconds']:.3f}")
    c.print(t)
    ref = doc["reference"]
    if ref:
        if ref.get("error"):
            c.print(line("reference: ", (ref["error"], "red")))
        else:
            c.print(f"reference {ref['name']}: max |logit diff| {ref['max_abs_diff']:.3g} "
                    f"(logit scale {ref['logit_scale']:.3g}), KL {ref['kl']:.3g}, "
                    f"top-1 agreement {ref['top1_agreement']:.1%}")
    _render_next(c, doc)


def _tok(entry: dict) -> str:
    return repr(entry["token"]) if entry["token"] is not None else f"#{entry['id']}"


def _render_next(c, doc: dict) -> None:
    """The top next tokens side by side, then the greedy continuations."""
    ours = doc.get("next_tokens")
    theirs = (doc.get("reference") or {}).get("next_tokens")
    if ours:
        t = Table(title="next token")
        t.add_column("ours")
        t.add_column("p", justify="right")
        if theirs:
            t.add_column("reference")
            t.add_column("p", justify="right")
        for k, o in enumerate(ours):
            row = [_tok(o), f"{o['prob']:.3f}"]
            if theirs and k < len(theirs):
                row += [_tok(theirs[k]), f"{theirs[k]['prob']:.3f}"]
            t.add_row(*row)
        c.print(t)
    gen = doc.get("generation")
    if gen:
        for who in ("ours", "reference"):
            g = gen.get(who)
            if g is None:
                continue
            shown = g.get("error") or (repr(g["text"]) if g.get("text") is not None else str(g["ids"]))
            c.print(line(f"generated ({who}, {gen['new_tokens']} tokens): ", shown))
        if gen.get("reference"):
            d = gen["first_difference"]
            c.print("greedy continuations agree" if d is None else f"greedy continuations differ from token {d}")
