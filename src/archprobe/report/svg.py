"""Small inline SVG charts (no scripts, no network): the layer strip, bars and the memory curve."""

from __future__ import annotations

import math
from html import escape as _escape

from archprobe.untrusted import visible


def escape(value) -> str:
    return _escape(visible(value), quote=True)

# residual kinds; mixer and FFN kinds take their colours from kinds/ (one registry)
PALETTE = {"attnres": "#c0392b", "gated": "#e67e22", "plain": "#95a5a6", "depth_weights": "#8e6c3b"}


def color(kind: str) -> str:
    from archprobe.kinds import colour

    return PALETTE.get(kind) or colour(kind)


STRIP_LABEL_W, STRIP_ROW_H = 70, 18     # a per-layer strip: the row labels' width, one row's height


def strip_geometry(n: int, rows: int) -> tuple[int, int, int]:
    """(cell width, svg width, svg height) of a per-layer strip of `n` columns and `rows` rows over an index axis."""
    cell = max(4, min(18, 960 // n))
    return cell, STRIP_LABEL_W + n * cell + 10, rows * (STRIP_ROW_H + 4) + 22


def strip_axis(n: int, cell: int, height: int) -> list[str]:
    """The layer indices under a strip (about a dozen of them)."""
    return [f"<text x='{STRIP_LABEL_W + i * cell}' y='{height - 4}' font-size='9'>{i}</text>"
            for i in range(0, n, max(1, n // 12))]


def layer_strip(layers: list[dict]) -> str:
    """One column per layer, rows mixer / FFN / residual; each cell is a link target #layer-N."""
    n = max(1, len(layers))
    rows = ("mixer", "ffn", "residual")
    label_w, row_h = STRIP_LABEL_W, STRIP_ROW_H
    cell, width, height = strip_geometry(n, len(rows))
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
             f"aria-label='layer plan' id='layer-strip'>"]
    for r, row in enumerate(rows):
        y = r * (row_h + 4)
        parts.append(f"<text x='0' y='{y + 13}' font-size='11'>{row}</text>")
        for layer in layers:
            kind = str(layer.get(row) or "none")
            index = layer["index"] if isinstance(layer["index"], int) else 0
            x = label_w + index * cell
            parts.append(f"<rect id='layer-{index}-{row}' x='{x}' y='{y}' width='{cell - 1}' "
                         f"height='{row_h}' fill='{color(kind)}' data-kind='{escape(kind)}'><title>layer "
                         f"{index}: {row} {escape(kind)}</title></rect>")
    parts += strip_axis(n, cell, height)
    parts.append("</svg>")
    return "".join(parts)


def legend(kinds: list[str]) -> str:
    return " ".join(f"<span class=chip style='background:{color(k)}'>{escape(k)}</span>" for k in kinds)


def bars(items: list[tuple[str, float]], unit: str = "", width: int = 520) -> str:
    if not items:
        return ""
    top = max(v for _, v in items) or 1
    row_h, label_w = 18, 170
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{label_w + width + 140}' "
             f"height='{len(items) * (row_h + 4)}' role='img' aria-label='bars'>"]
    for i, (label, value) in enumerate(items):
        y = i * (row_h + 4)
        w = width * value / top
        parts.append(f"<text x='{label_w - 6}' y='{y + 13}' font-size='11' text-anchor='end'>"
                     f"{escape(str(label))}</text>"
                     f"<rect x='{label_w}' y='{y}' width='{w:.1f}' height='{row_h}' fill='#3a7bd5'/>"
                     f"<text x='{label_w + w + 4}' y='{y + 13}' font-size='11'>{value:,.0f}{unit}</text>")
    parts.append("</svg>")
    return "".join(parts)


def memory_curve(points: list[tuple[int, float, float]], budget: float | None, target: int) -> str:
    """points: (context, peak bytes, cache bytes); log-x, GiB on y; a dashed budget line."""
    w, h, left, bottom = 640, 280, 70, 36
    xs = [math.log2(c) for c, _, _ in points]
    top = max([p for _, p, _ in points] + ([budget] if budget else [])) * 1.08 or 1
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1

    def px(c):
        return left + (math.log2(c) - x0) / (x1 - x0) * (w - left - 10)

    def py(v):
        return h - bottom - v / top * (h - bottom - 10)

    gib = 1024 ** 3
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' role='img' "
             f"aria-label='memory versus context' id='memory-curve'>",
             f"<line x1='{left}' y1='{h - bottom}' x2='{w - 10}' y2='{h - bottom}' stroke='#555'/>",
             f"<line x1='{left}' y1='10' x2='{left}' y2='{h - bottom}' stroke='#555'/>"]
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        v = top * frac
        parts.append(f"<text x='{left - 6}' y='{py(v) + 4:.1f}' font-size='10' text-anchor='end'>"
                     f"{v / gib:.3g} GiB</text>")
    for c, _, _ in points[:: max(1, len(points) // 8)]:
        parts.append(f"<text x='{px(c):.1f}' y='{h - bottom + 14}' font-size='10' text-anchor='middle'>"
                     f"{_tokens(c)}</text>")
    for idx, name, dash in ((1, "peak", ""), (2, "caches", "4 3")):
        path = " ".join(f"{'M' if i == 0 else 'L'}{px(p[0]):.1f},{py(p[idx]):.1f}" for i, p in enumerate(points))
        parts.append(f"<path d='{path}' fill='none' stroke='{'#d5793a' if idx == 1 else '#3a7bd5'}' "
                     f"stroke-width='2' stroke-dasharray='{dash}'><title>{name}</title></path>")
    if budget:
        parts.append(f"<line id='budget-line' x1='{left}' x2='{w - 10}' y1='{py(budget):.1f}' y2='{py(budget):.1f}' "
                     f"stroke='#c0392b' stroke-dasharray='6 4'/><text x='{w - 12}' y='{py(budget) - 4:.1f}' "
                     f"font-size='10' text-anchor='end' fill='#c0392b'>budget {budget / gib:.3g} GiB</text>")
    tp = next((p for p in points if p[0] == target), None)
    if tp:
        parts.append(f"<circle cx='{px(tp[0]):.1f}' cy='{py(tp[1]):.1f}' r='4' fill='#d5793a'/>")
    parts.append(f"<text x='{w - 12}' y='22' font-size='10' text-anchor='end'>solid: peak; dashed: caches; "
                 f"x: context (tokens, log)</text></svg>")
    return "".join(parts)


def _tokens(c: int) -> str:
    if c >= 1 << 20 and c % (1 << 20) == 0:
        return f"{c >> 20}M"
    if c >= 1024 and c % 1024 == 0:
        return f"{c >> 10}k"
    return str(c)
