"""Terminal rendering of the observe document: findings, routing, depth, horizons, gates, MLA rank."""

from __future__ import annotations

from archprobe.cli.textsafe import SafeConsole, line


def render_observe(doc: dict) -> None:
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
