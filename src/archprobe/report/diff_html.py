"""The report's diff section (`report --diff B [--diff-data] [--diff-forward]`): what the header diff found,
the per-layer error strip (weights and hidden states, one cell per layer) and the logit comparison.

Inline SVG only (no scripts, no network), like the rest of the page; every value from the document is escaped
(tensor and role names come from someone else's checkpoint), and numbers are formatted only when numbers.
"""

from __future__ import annotations

import math

from archprobe.report.html import e, fmt, num
from archprobe.report.svg import STRIP_LABEL_W, STRIP_ROW_H, strip_axis, strip_geometry


def _shade(value, lo: float, hi: float) -> str:
    """White (lo) to red (hi) on a log scale; grey where nothing was compared."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return "#dddddd"
    if value <= 0:
        return "#ffffff"
    span = max(hi - lo, 1e-12)
    t = min(1.0, max(0.0, (math.log10(value) - lo) / span))
    g = int(255 - 200 * t)
    return f"#ff{g:02x}{g:02x}"


def _row(values: dict[int, float]) -> tuple[float, float]:
    logs = [math.log10(v) for v in values.values() if isinstance(v, int | float) and v > 0 and math.isfinite(v)]
    return (min(logs), max(logs)) if logs else (0.0, 1.0)


def error_strip(data: dict | None, forward: dict | None) -> str:
    """One column per decoder layer; row `weights` is --data's mean relative error (flagged layers outlined),
    row `hidden` --forward's relative RMS of the layer output."""
    rows: list[tuple[str, dict[int, float], set[int]]] = []
    if data:
        w = {int(r["layer"]): r.get("rel_error") for r in data.get("layers", []) if str(r.get("layer")).isdigit()}
        flagged = {int(x) for x in data.get("flagged_layers", []) if str(x).isdigit()}
        rows.append(("weights", w, flagged))
    if forward:
        h = {int(r["layer"]): r.get("rel_rms") for r in forward.get("layers", [])
             if isinstance(r.get("layer"), int) and r.get("compared")}
        rows.append(("hidden", h, set()))
    n = max([max(v, default=-1) + 1 for _, v, _ in rows] + [1])
    label_w, row_h = STRIP_LABEL_W, STRIP_ROW_H
    cell, width, height = strip_geometry(n, len(rows))
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
             "aria-label='per-layer error' id='diff-strip'>"]
    for r, (name, values, flagged) in enumerate(rows):
        y = r * (row_h + 4)
        lo, hi = _row(values)
        parts.append(f"<text x='0' y='{y + 13}' font-size='11'>{name}</text>")
        for i in range(n):
            v = values.get(i)
            stroke = " stroke='#000' stroke-width='2'" if i in flagged else ""
            parts.append(f"<rect id='diff-{name}-{i}' x='{label_w + i * cell}' y='{y}' width='{cell - 1}' "
                         f"height='{row_h}' fill='{_shade(v, lo, hi)}'{stroke} data-value='{e(v)}'>"
                         f"<title>layer {i}: {name} {fmt(v, '.3e')}</title></rect>")
    parts += strip_axis(n, cell, height)
    parts.append("</svg>")
    return "".join(parts)


def _logits(lg: dict) -> str:
    if "error" in lg:
        return f"<p>logits not compared: {e(lg['error'])}</p>"
    cells = [("Mean KLD", "mean_kld", ".6f"), ("99.0% KLD", "kld_99", ".6f"), ("99.9% KLD", "kld_99_9", ".6f"),
             ("Maximum KLD", "max_kld", ".6f"), ("RMS Δp", "rms_delta_p", ".3%"), ("Same top p", "same_top_p", ".3%")]
    head = "".join(f"<th>{e(t)}</th>" for t, _, _ in cells)
    body = "".join(f"<td class=num>{num('diff-' + k.replace('_', '-'), lg.get(k), fmt(lg.get(k), f))}</td>"
                   for _, k, f in cells)
    return (f"<table><tr>{head}</tr><tr>{body}</tr></table><p class=muted>{fmt(lg.get('positions'), ',')} "
            "positions, A as the base, as llama-perplexity --kl-divergence reports them.</p>")


def diff_section(d: dict | None) -> str:
    if not d:
        return ""
    s = d.get("summary", {})
    head = (f"<p>A <code>{e(d['a'].get('location'))}</code> against B <code>{e(d['b'].get('location'))}</code>: "
            + ("<b>no differences</b>" if d.get("identical") else "they differ")
            + f". Card fields {fmt(s.get('card_fields'), ',')}, config keys {fmt(s.get('config_keys'), ',')}, "
            f"tensors added {fmt(s.get('tensors_added'), ',')}, removed {fmt(s.get('tensors_removed'), ',')}, "
            f"renamed {fmt(s.get('tensors_renamed'), ',')}, changed {fmt(s.get('tensors_changed'), ',')}.</p>")
    parts = ["<section id=diff><h2>Diff</h2>", head]
    data, fwd = d.get("data"), d.get("forward")
    if data or fwd:
        parts.append("<h3>Per-layer error</h3>" + error_strip(data, fwd)
                     + "<p class=muted>darker = larger error (log scale per row); outlined = flagged layer.</p>")
    if data:
        parts.append(f"<p>weights: {num('diff-data-compared', data['compared'])} tensors compared by role, "
                     f"{num('diff-data-differing', data['differing'])} differ; worst layer "
                     f"{num('diff-worst-layer', data.get('worst_layer'))}.</p>")
        rows = "".join(f"<tr><td>{e(r['role'])}</td><td class=num>{fmt(r['rel_error'], '.3e')}</td>"
                       f"<td class=num>{fmt(r['max_error'], '.3e')}</td><td class=num>{fmt(r['cosine'], '.6f')}</td>"
                       f"<td class=num>{fmt(r['outlier_share'], '.2%')}</td></tr>"
                       for r in data["tensors"]["items"][:50])
        if rows:
            parts.append("<table><tr><th>tensor (role)</th><th>rel error</th><th>max error</th><th>cosine</th>"
                         f"<th>outliers</th></tr>{rows}</table>")
    if fwd:
        parts.append(f"<h3>Logits</h3><p>{fmt(fwd.get('tokens'), ',')} tokens.</p>" + _logits(fwd.get("logits", {})))
        for side, why in (fwd.get("errors") or {}).items():
            parts.append(f"<p>{e(side.upper())}: {e(why)}</p>")
    parts.append("</section>")
    return "".join(parts)
