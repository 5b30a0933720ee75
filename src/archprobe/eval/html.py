"""The eval report as one self-contained HTML page: verdict, nine checks, a per-task success plot
(inline SVG, no network, no JavaScript) and the full attempt table, failures included (C3)."""

from __future__ import annotations

from html import escape as _escape

from archprobe.untrusted import visible


def escape(value) -> str:
    """Every interpolated value: HTML-escaped, quotes included (values in attributes are quoted)."""
    return _escape(visible(value), quote=True)

STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
.met{background:#e3f6e3}.not_met{background:#fbe3e3}.unknown{background:#fff6d6}
.pass{color:#176b17}.fail{color:#a31515}.error,.timeout,.cancelled{color:#8a6d00}
.verdict{font-size:1.3em;font-weight:600}code{background:#f3f3f3;padding:0 3px}"""


def render_html(r: dict) -> str:
    rate = r["success_rate"]
    head = (f"<h1>Evaluation run <code>{escape(r['run_id'])}</code></h1>"
            f"<p class=verdict id=verdict>{escape(r['verdict'])}</p>"
            f"<p>Model <b>{escape(str(r['model']))}</b> at <code>{escape(str(r['endpoint']))}</code>; "
            f"task set <code>{escape(r['task_set_hash'])}</code>; {escape(r['attempts_per_task'])} attempt(s) "
            "per task; "
            f"run by {escape(str(r['operator']))}@{escape(str(r['host']))}.</p>"
            f"<p>Success rate <b id=success-rate>{pct(rate)}</b>, 95% interval "
            f"<span id=ci95>[{pct(r['ci95'][0])}, {pct(r['ci95'][1])}]</span> ({escape(r['ci_method'])}); "
            f"attempts in all <b id=attempts-total>{escape(r['attempts_total'])}</b>, retries {escape(r['retries'])}, "
            f"interventions {'unknown' if r['interventions'] is None else escape(r['interventions'])}.</p>")
    outcomes = "".join(f"<td class='{escape(k)}'>{escape(k)} <b>{escape(v)}</b></td>"
                       for k, v in r["outcomes"].items())
    checks = "".join(f"<tr class='{escape(c['status'])}'><td>{escape(k)}</td><td>{escape(c['status'])}</td>"
                     f"<td>{escape(c['evidence'])}</td></tr>" for k, c in r["checks"].items())
    attempts = "".join(
        f"<tr><td>{escape(a['attempt_id'])}</td><td>{escape(a['task_id'])}</td><td class='{escape(a['outcome'])}'>"
        f"{escape(a['outcome'] or 'no outcome')}</td><td>{_secs(a['seconds'])}</td>"
        f"<td>{_n(a['tokens_in'])}</td><td>{_n(a['tokens_out'])}</td><td>{escape(a['retry_of'] or '')}</td>"
        f"<td>{'yes' if a['assisted'] else ''}</td><td>{escape(str(a.get('reason') or ''))}</td></tr>"
        for a in r["attempts"])
    return (f"<!doctype html><html><head><meta charset=utf-8><title>archprobe eval {escape(r['run_id'])}</title>"
            f"<style>{STYLE}</style></head><body>{head}<table><tr>{outcomes}</tr></table>"
            f"<h2>The nine checks</h2><table><tr><th>check</th><th>status</th><th>evidence</th></tr>{checks}</table>"
            f"<h2>Success per task</h2>{per_task_svg(r['per_task'])}"
            f"<h2>Every attempt</h2><table id=attempts><tr><th>attempt</th><th>task</th><th>outcome</th><th>s</th>"
            f"<th>tokens in</th><th>tokens out</th><th>retry of</th><th>assisted</th><th>reason</th></tr>{attempts}"
            f"</table></body></html>")


def per_task_svg(per_task: list[dict]) -> str:
    bar_h, gap, label_w, width = 16, 4, 180, 420
    height = len(per_task) * (bar_h + gap) + 24
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{label_w + width + 80}' height='{height}' "
             f"role='img' aria-label='success rate per task'>"]
    for i, t in enumerate(per_task):
        y = i * (bar_h + gap)
        rate = t["success_rate"]
        w = 0 if rate is None else rate * width
        parts.append(f"<text x='{label_w - 6}' y='{y + 12}' text-anchor='end' font-size='12'>"
                     f"{escape(str(t['task_id'])[:28])}</text>"
                     f"<rect x='{label_w}' y='{y}' width='{width}' height='{bar_h}' fill='#eee'/>"
                     f"<rect x='{label_w}' y='{y}' width='{w:.1f}' height='{bar_h}' fill='#3a7bd5'/>"
                     f"<text x='{label_w + width + 6}' y='{y + 12}' font-size='12'>"
                     f"{escape(t['passes'])}/{escape(t['scored'])}</text>")
    parts.append("</svg>")
    return "".join(parts)


def pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _secs(x) -> str:
    return "" if x is None else f"{x:.2f}" if isinstance(x, int | float) else escape(x)


def _n(x) -> str:
    return "" if x is None else escape(x)
