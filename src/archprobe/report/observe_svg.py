"""observe's plots as inline SVG (no scripts, no network) and the --html page that holds them: the
collapse curve, the AttnRes layer x source heat map, expert load per layer, horizons per head."""

from __future__ import annotations

import math

from archprobe.report.svg import escape

W, H = 560, 200


def _svg(width: int, height: int, label: str, body: list[str]) -> str:
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
            f"aria-label='{escape(label)}'>" + "".join(body) + "</svg>")


def collapse_curve(depth: list[dict]) -> str:
    pts = [(d["layer"], d["cosine_in_out"]) for d in depth if isinstance(d.get("cosine_in_out"), float)
           and math.isfinite(d["cosine_in_out"])]
    if not pts:
        return ""
    n = max(p[0] for p in pts) or 1
    lo = min(0.0, min(p[1] for p in pts))

    def xy(i, c):
        return 40 + i / n * (W - 60), 10 + (1 - (c - lo) / (1 - lo or 1)) * (H - 40)

    poly = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(*p) for p in pts))
    body = [f"<polyline fill='none' stroke='#3a7bd5' stroke-width='2' points='{poly}'/>",
            f"<text x='0' y='14' font-size='11'>cos 1</text><text x='0' y='{H - 30}' font-size='11'>{lo:.2g}</text>",
            f"<text x='40' y='{H - 8}' font-size='11'>layer 0</text>"
            f"<text x='{W - 60}' y='{H - 8}' font-size='11'>layer {n}</text>"]
    return _svg(W, H, "cosine of the stream before and after each layer", body)


def heat_map(rows: list[tuple[str, list[float]]], label: str, cell: int = 14) -> str:
    """Rows of values in [0, max]; darker = larger."""
    if not rows:
        return ""
    cols = max(len(r) for _, r in rows)
    top = max((v for _, r in rows for v in r if math.isfinite(v)), default=1.0) or 1.0
    body = []
    for y, (name, values) in enumerate(rows):
        body.append(f"<text x='0' y='{y * cell + cell - 3}' font-size='10'>{escape(name)}</text>")
        for x, v in enumerate(values):
            shade = int(255 - 215 * (v / top if math.isfinite(v) else 0))
            body.append(f"<rect x='{90 + x * cell}' y='{y * cell}' width='{cell - 1}' height='{cell - 1}' "
                        f"fill='rgb({shade},{shade},255)'><title>{escape(name)} / {x}: {v:.3g}</title></rect>")
    return _svg(100 + cols * cell, len(rows) * cell + 4, label, body)


def horizon_bars(horizons: list[dict]) -> str:
    items = [(f"L{h['layer']} h{h['head']}", h["tokens"]) for h in horizons if h["tokens"] is not None]
    if not items:
        return ""
    top = max(math.log10(1 + v) for _, v in items) or 1.0
    body = []
    for i, (name, v) in enumerate(items[:200]):
        w = (W - 160) * math.log10(1 + v) / top
        body.append(f"<text x='0' y='{i * 12 + 10}' font-size='10'>{escape(name)}</text>"
                    f"<rect x='70' y='{i * 12 + 2}' width='{w:.1f}' height='9' fill='#5aa0e8'/>"
                    f"<text x='{74 + w:.1f}' y='{i * 12 + 10}' font-size='10'>{v:.3g}</text>")
    return _svg(W, min(len(items), 200) * 12 + 4, "memory horizon per head (half-life, tokens, log scale)", body)


def sections(doc: dict) -> list[tuple[str, str]]:
    """(title, svg) for each plot that has data."""
    out = [("Collapse curve: cos(stream before, after) per layer", collapse_curve(doc.get("depth", [])))]
    res = [(f"L{a['layer']} {a['site']}" if a["layer"] is not None else "output", a["weights"])
           for a in doc.get("attnres", [])]
    out.append(("AttnRes depth-attention (row: layer and site, column: source, 0 = embedding)",
                heat_map(res, "AttnRes weights")))
    load = [(f"L{r['layer']}", [x / max(1, sum(r["load"])) for x in r["load"]]) for r in doc.get("routing", [])]
    out.append(("Expert load per layer (share of selections)", heat_map(load, "expert load", cell=8)))
    out.append(("Memory horizon per head", horizon_bars(doc.get("horizons", []))))
    return [(t, s) for t, s in out if s]


def page(doc: dict) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>archprobe observe</title></head><body>"
             f"<h1>archprobe observe: {escape(doc.get('source', ''))}</h1><p>{doc.get('tokens', 0)} tokens</p><ul>"]
    parts += [f"<li>{escape(f['severity'])}: {escape(f['message'])}</li>" for f in doc.get("findings", [])]
    parts.append("</ul>")
    for title, svg in sections(doc):
        parts.append(f"<h2>{escape(title)}</h2>{svg}")
    return "".join(parts) + "</body></html>"
