"""The report as one self-contained HTML page: inline CSS and SVG, no scripts, no network."""

from __future__ import annotations

from html import escape

from archprobe.report import svg
from archprobe.untrusted import visible

CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222;padding:0 1em}
h1{margin-bottom:.2em}nav a{margin-right:1em}table{border-collapse:collapse;margin:.6em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f4f4f4}
.num{text-align:right;font-variant-numeric:tabular-nums}.chip{display:inline-block;padding:0 6px;margin:2px;
border-radius:3px;color:#fff;font-size:12px}.handled,.supported{background:#e3f6e3}.missing,.unknown{background:#fbe3e3}
.unverified{background:#fff6d6}.muted{color:#777}code{background:#f3f3f3;padding:0 3px}section{margin-top:1.6em}"""


def gib(b) -> str:
    return "n/a" if b is None else f"{b / 1024 ** 3:,.3f} GiB"


def e(value) -> str:
    """Every interpolated value goes through here: HTML-escaped, quotes included (attributes use ')."""
    return escape(visible(value), quote=True)


def fmt(value, spec: str) -> str:
    """`value` formatted with `spec` when it is a number; anything else (a hostile JSON string) shown as text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return e(format(value, spec))
        except (ValueError, OverflowError):
            pass
    return e(value)


def num(id_: str, value, shown: str | None = None) -> str:
    """A key number: exact value in data-value (what tests and scripts read), a readable form shown."""
    shown = shown if shown is not None else (f"{value:,}" if isinstance(value, int) else str(value))
    return f"<span id='{e(id_)}' data-value='{e(value)}'>{e(shown)}</span>"


def render(data: dict) -> str:
    doc, mem = data["inspect"], data["memory"]
    arch = doc["architecture"]
    name = doc.get("wrapper_model_type") or doc["model_type"]
    body = [f"<h1>archprobe report: {e(name)}</h1>",
            f"<p class=muted>source <code>{e(doc['source']['location'])}</code> "
            f"({e(doc['source']['kind'])}); read from config.json and shard headers only.</p>",
            "<nav><a href='#structure'>structure</a><a href='#features'>features</a><a href='#layers'>layer plan</a>"
            "<a href='#params'>parameters</a><a href='#memory'>memory</a><a href='#adapt'>adaptation</a>"
            "<a href='#validate'>validation</a>" + ("<a href='#diff'>diff</a>" if data.get("diff") else "")
            + "</nav>",
            _structure(doc, arch), _features(doc), _layers(doc), _params(doc), _memory(data, mem),
            _adapt(data.get("adapt") or {}), _releases(data.get("adapt") or {}), _validate(data.get("validate")),
            _observe(data.get("observe")), _sizing(data.get("sizing")), _diff(data.get("diff"))]
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><link rel=icon href='data:,'>"
            f"<title>archprobe report: {e(name)}</title><style>{CSS}</style></head><body>"
            + "".join(body) + "<p class=muted>archprobe: read the weights, not the rumors.</p></body></html>")


def _structure(doc, arch) -> str:
    p = doc["params"]
    rows = [("architectures", e(", ".join(map(str, doc.get("architectures") or [])))),
            ("model_type", e(doc["model_type"])),
            ("layers", num("num-layers", arch["num_layers"])), ("hidden size", num("hidden-size", arch["hidden_size"])),
            ("attention heads / KV heads", f"{e(arch.get('num_heads'))} / {e(arch.get('num_kv_heads'))}"),
            ("mixers", num("mixers", ", ".join(f"{k}×{v}" for k, v in arch.get("mixers", {}).items()))),
            ("FFNs", e(", ".join(f"{k}×{v}" for k, v in arch.get("ffns", {}).items()))),
            ("experts (top-k)", f"{num('num-experts', arch.get('num_experts'))} ({num('top-k', arch.get('top_k'))})"),
            ("parameters total", num("params-total", p["total"])),
            ("parameters active", num("params-active", p["active"])),
            ("files / tensors", f"{fmt(doc['storage']['files'], ',')} / {fmt(doc['storage']['tensors'], ',')}"),
            ("stored bytes", num("storage-bytes", doc["storage"]["bytes"])),
            ("quantization", e(", ".join(f"{q['scheme']} ({q['tensors']:,} tensors)"
                                              for q in doc.get("quantization", [])) or "none"))]
    table = "".join(f"<tr><th>{k}</th><td class=num>{v}</td></tr>" for k, v in rows)
    warn = "".join(f"<li>{e(w)}</li>" for w in doc.get("warnings", []))
    return (f"<section id=structure><h2>Structure</h2><table>{table}</table>"
            + (f"<ul class=muted>{warn}</ul>" if warn else "") + "</section>")


def _features(doc) -> str:
    rows = []
    for f in doc["features"]:
        layers = f.get("layers") or []
        links = " ".join(f"<a href='#layer-{e(i)}-mixer'>{e(i)}</a>" for i in layers[:24])
        links += " …" if len(layers) > 24 else ""
        ev = "<br>".join(f"<code>{e(x.get('tensor'))}</code> {e(x.get('shape') or '')} "
                         f"<span class=muted>{e(x.get('why', ''))}</span>" for x in f["evidence"][:3])
        rows.append(f"<tr id='feature-{e(f['id'])}'><td>{e(f['id'])}</td><td class=num>"
                    f"{fmt(f['confidence'], '.2f')}</td><td>{links}</td><td>{ev}</td></tr>")
    return ("<section id=features><h2>Detected features</h2><table><tr><th>feature</th><th>confidence</th>"
            "<th>layers</th><th>evidence (tensor, shape)</th></tr>" + "".join(rows) + "</table></section>")


def _layers(doc) -> str:
    kinds = sorted({str(layer.get(k) or "none") for layer in doc["layers"] for k in ("mixer", "ffn", "residual")})
    return (f"<section id=layers><h2>Layer plan</h2>{svg.layer_strip(doc['layers'])}<p>{svg.legend(kinds)}</p>"
            "</section>")


def _params(doc) -> str:
    comp = sorted(doc["params"]["by_component"].items(), key=lambda kv: -kv[1])
    return f"<section id=params><h2>Parameters by component</h2>{svg.bars(comp)}</section>"


def _memory(data, mem) -> str:
    points = [(p["context"], p["peak_bytes"], p["cache_bytes"]) for p in data["sweep"]]
    caches = "".join(f"<tr><td>{e(k)}</td><td class=num>{num('cache-' + k, v, gib(v))}</td></tr>"
                     for k, v in mem["cache_by_layer_type"].items())
    fits = ""
    if data.get("budget_bytes"):
        fits = (f"<p>Budget {num('budget', data['budget_bytes'], gib(data['budget_bytes']))}: largest context that "
                f"fits {num('largest-fitting-context', data['largest_fitting_context'])} tokens.</p>")
    assumptions = "".join(f"<li>{e(a)}</li>" for a in mem["assumptions"])
    return (f"<section id=memory><h2>Memory</h2>{svg.memory_curve(points, data.get('budget_bytes'), mem['context'])}"
            f"<p>At {num('memory-context', mem['context'])} tokens × batch {num('memory-batch', mem['batch'])}: peak "
            f"<b>{num('memory-peak', mem['peak_bytes'], gib(mem['peak_bytes']))}</b> = weights "
            f"{num('memory-weights', mem['weights_bytes'], gib(mem['weights_bytes']))} + caches "
            f"{num('memory-cache', mem['cache_bytes'], gib(mem['cache_bytes']))} + activations "
            f"{num('memory-activations', mem['activation_bytes'], gib(mem['activation_bytes']))}.</p>{fits}"
            f"<table><tr><th>cache by layer type</th><th>bytes</th></tr>{caches}</table>"
            f"<ul class=muted>{assumptions}</ul></section>")


def _adapt(ad) -> str:
    if not ad or ad.get("error"):
        return f"<section id=adapt><h2>Adaptation</h2><p>{e(ad.get('error', 'not run'))}</p></section>"
    rows = "".join(f"<tr id='adapt-{e(r['framework'])}'><td>{e(r['framework'])}</td>"
                   f"<td>{e(r['version'] or '')}</td><td class='{e(r['status'].split()[0])}' "
                   f"data-status='{e(r['status'])}'>{e(r['status'])}</td><td>{e(r['known_as'] or '')}"
                   f"</td><td>{', '.join(_feature_link(m) for m in r['missing'])}</td></tr>" for r in ad["frameworks"])
    shown = [r for r in ad["frameworks"] if r["installed"] and r["features"]]
    head = "".join(f"<th>{e(r['framework'])}</th>" for r in shown)
    matrix = "".join(f"<tr><td>{_feature_link(fid)}</td>" + "".join(
        _status_cell(ad["matrix"][fid][r["framework"]]) for r in shown) + "</tr>" for fid in ad["features"])
    return (f"<section id=adapt><h2>Adaptation</h2><p class=muted>{e(ad['note'])}</p><table><tr><th>framework"
            f"</th><th>version</th><th>status</th><th>known as</th><th>missing features</th></tr>{rows}</table>"
            f"<table><tr><th>feature</th>{head}</tr>{matrix}</table></section>")


def _releases(ad) -> str:
    from archprobe.report.releases_html import releases_section

    return releases_section(ad) if not ad.get("error") else ""


def _status_cell(status: str) -> str:
    return f"<td class='{e(status.split()[0])}'>{e(status)}</td>"


def _diff(d) -> str:
    from archprobe.report.diff_html import diff_section  # imports this module: loaded on use

    return diff_section(d)


def _feature_link(fid: str) -> str:
    return f"<a href='#feature-{e(fid)}'>{e(fid)}</a>"


def _validate(v) -> str:
    """A `validate --json` document, possibly from a file someone else wrote: every value escaped, numbers
    formatted only when they are numbers."""
    if not v:
        return ("<section id=validate><h2>Validation</h2><p class=muted>not run (<code>archprobe report --validate"
                "</code> or <code>--validate-json FILE</code>)</p></section>")
    layers = v.get("layers") if isinstance(v.get("layers"), list) else []
    rows = "".join(f"<tr><td><a href='#layer-{e(s.get('index'))}-mixer'>{e(s.get('index'))}</a></td>"
                   f"<td>{e(s.get('kind'))}</td><td class=num>{fmt(s.get('out_rms'), '.4g')}</td>"
                   f"<td class=num>{fmt(s.get('max_abs'), '.4g')}</td>"
                   f"<td>{'yes' if s.get('finite') is True else 'NO'}</td></tr>"
                   for s in layers if isinstance(s, dict))
    ref = v.get("reference")
    ref_line = f"<p>reference: {e(ref)}</p>" if ref else ""
    unmapped = v.get("unmapped_tensors")
    n_unmapped = len(unmapped) if isinstance(unmapped, list) else unmapped
    from archprobe.validate.status import meaning

    gloss = f" ({e(meaning(v.get('status')))})" if meaning(v.get("status")) else ""
    return (f"<section id=validate><h2>Validation</h2><p>status <b>{num('validate-status', v.get('status'))}</b>"
            f"{gloss}; "
            f"{fmt(v.get('mapped_tensors', 0), ',')} tensors mapped, {fmt(n_unmapped, ',')} not mapped.</p>"
            f"{ref_line}<table><tr><th>layer</th><th>kind</th><th>rms</th><th>max |h|</th><th>finite</th></tr>{rows}"
            "</table></section>")


def _observe(o) -> str:
    """An `observe --json` document (maybe from someone else's file): findings escaped, plots drawn only
    from a well-formed document."""
    if not o:
        return ""
    from archprobe.report.observe_svg import sections

    found = o.get("findings") if isinstance(o.get("findings"), list) else []
    items = "".join(f"<li>{e(f.get('severity'))}: {e(f.get('message'))}</li>" for f in found if isinstance(f, dict))
    try:
        plots = "".join(f"<h3>{e(t)}</h3>{svg}" for t, svg in sections(o))
    except (TypeError, ValueError, KeyError, AttributeError, IndexError):
        plots = "<p class=muted>plots left out: the document is not well formed</p>"
    return (f"<section id=observe><h2>Observation</h2><p>{fmt(o.get('tokens', 0), ',')} tokens observed.</p>"
            f"<ul>{items or '<li>nothing unusual found</li>'}</ul>{plots}</section>")


def _sizing(z) -> str:
    """The sizing answer (`report --gpu/--devices/--tp/--engine`): layout, busiest device, fit, assumptions."""
    if not z:
        return ""
    dev = z.get("device") or {}
    rows = "".join(f"<tr><td>{r['rank']}</td><td>{e(gib(r['weights_bytes']))}</td><td>{e(gib(r['cache_bytes']))}"
                   f"</td><td>{e(gib(r['activation_bytes']))}</td><td>{e(gib(r['overhead_bytes']))}</td>"
                   f"<td>{e(gib(r['peak_bytes']))}</td></tr>" for r in z["per_device"][:64])
    fit = ("" if "fits" not in z else f"<p>Usable per device {e(gib(z['usable_device_bytes']))}: "
           + ("fits" if z["fits"] else "does not fit") + (f"; largest context {z['largest_fitting_context']:,} "
                                                          "tokens" if z.get("largest_fitting_context") else "")
           + (" (the model's maximum)" if z.get("capped_at_model_max") else "") + ".</p>")
    notes = "".join(f"<li>{e(a)}</li>" for a in z["assumptions"])
    where = " x ".join(f"{k.upper()}{v}" for k, v in z["layout"].items() if k != "pp_layers" and v > 1) or "1 device"
    return (f"<section id=sizing><h2>Sizing</h2><p>{z['devices']} x {e(dev.get('label', dev.get('name', 'device')))}"
            f", layout {e(where)}, busiest device {e(gib(z['busiest_device_bytes']))}.</p>{fit}"
            "<table><tr><th>rank</th><th>weights</th><th>cache</th><th>activations</th><th>reserve</th><th>peak</th>"
            f"</tr>{rows}</table><ul class=muted>{notes}</ul></section>")
