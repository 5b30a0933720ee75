"""The report as Markdown (for issues, PRs and chat): the same numbers, tables instead of charts.

Every interpolated value goes through `md()`: HTML special characters become entities (a model_type
`<img onerror=...>` stays text) and Markdown's own metacharacters are backslash-escaped, so a
tensor name cannot open a link, an image, a code span or a new table cell.
"""

from __future__ import annotations

import re
from html import escape

from archprobe.report.html import gib
from archprobe.untrusted import visible

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>])")


def md(value) -> str:
    """`value` as inert Markdown text on one line."""
    text = escape(visible(value), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", text)


def num(value, spec: str = ",") -> str:
    """A number formatted with `spec`; anything else (a hostile JSON value) as escaped text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return md(format(value, spec))
        except (ValueError, OverflowError):
            pass
    return md(value)


def render(data: dict) -> str:
    doc, mem = data["inspect"], data["memory"]
    arch, p = doc["architecture"], doc["params"]
    name = doc.get("wrapper_model_type") or doc["model_type"]
    out = [f"# archprobe report: {md(name)}", "", f"Source {md(doc['source']['location'])} (config.json and shard "
           "headers only).", "", "## Structure", "", "| | |", "|---|---|",
           f"| architectures | {md(', '.join(map(str, doc.get('architectures') or [])))} |",
           f"| layers | {num(arch['num_layers'])} |", f"| hidden size | {num(arch['hidden_size'])} |",
           f"| mixers | {md(', '.join(f'{k}×{v}' for k, v in arch.get('mixers', {}).items()))} |",
           f"| FFNs | {md(', '.join(f'{k}×{v}' for k, v in arch.get('ffns', {}).items()))} |",
           f"| experts (top-k) | {num(arch.get('num_experts'))} ({num(arch.get('top_k'))}) |",
           f"| parameters total | {num(p['total'])} |", f"| parameters active | {num(p['active'])} |", "",
           "## Detected features", "", "| feature | confidence | layers | evidence |", "|---|---|---|---|"]
    for f in doc["features"]:
        ev = f["evidence"][0] if f["evidence"] else {}
        layers = f.get("layers") or []
        out.append(f"| {md(f['id'])} | {num(f['confidence'], '.2f')} | {md(', '.join(map(str, layers[:12])))}"
                   f"{' …' if len(layers) > 12 else ''} | {md(ev.get('tensor', ''))} {md(ev.get('shape') or '')} |")
    out += ["", "## Layer plan", "", "| layer | mixer | FFN | residual |", "|---|---|---|---|"]
    out += [f"| {num(la['index'])} | {md(la['mixer'])} | {md(la['ffn'])} | {md(la['residual'])} |"
            for la in doc["layers"]]
    out += ["", "## Parameters by component", "", "| component | parameters |", "|---|---|"]
    out += [f"| {md(k)} | {num(v)} |" for k, v in sorted(p["by_component"].items(), key=lambda kv: -kv[1])]
    out += ["", "## Memory", "", f"At {num(mem['context'])} tokens × batch {num(mem['batch'])}: peak "
            f"{gib(mem['peak_bytes'])} ({num(mem['peak_bytes'])} bytes) = weights {gib(mem['weights_bytes'])} + "
            f"caches {gib(mem['cache_bytes'])} + activations {gib(mem['activation_bytes'])}.", "",
            "| context | peak | caches |", "|---|---|---|"]
    out += [f"| {num(s['context'])} | {gib(s['peak_bytes'])} | {gib(s['cache_bytes'])} |" for s in data["sweep"]]
    if data.get("budget_bytes"):
        out += ["", f"Budget {gib(data['budget_bytes'])}: largest fitting context "
                f"{num(data['largest_fitting_context'])} tokens."]
    ad = data.get("adapt") or {}
    out += ["", "## Adaptation", ""]
    if ad.get("frameworks"):
        out += ["| framework | version | status | missing |", "|---|---|---|---|"]
        out += [f"| {md(r['framework'])} | {md(r['version'] or '')} | {md(r['status'])} | "
                f"{md(', '.join(map(str, r['missing'])))} |" for r in ad["frameworks"]]
    else:
        out.append(md(ad.get("error", "not run")))
    v = data.get("validate")
    out += ["", "## Validation", ""]
    if v:
        from archprobe.validate.status import meaning

        gloss = f" ({md(meaning(v.get('status')))})" if meaning(v.get("status")) else ""
        out.append(f"Status **{md(v.get('status'))}**{gloss}; {num(v.get('mapped_tensors', 0))} tensors mapped.")
        out += ["", "| layer | kind | rms | max abs | finite |", "|---|---|---|---|---|"]
        layers = v.get("layers") if isinstance(v.get("layers"), list) else []
        out += [f"| {num(s.get('index'))} | {md(s.get('kind'))} | {num(s.get('out_rms'), '.4g')} | "
                f"{num(s.get('max_abs'), '.4g')} | {md(s.get('finite'))} |" for s in layers if isinstance(s, dict)]
    else:
        out.append("Not run (`archprobe report --validate`).")
    out += _diff(data.get("diff"))
    return "\n".join(out) + "\n"


def _diff(d) -> list[str]:
    """`report --diff B`: the summary, the per-layer errors and the logit figures (the HTML page draws them)."""
    if not d:
        return []
    s = d.get("summary", {})
    out = ["", "## Diff", "", f"A `{md(d['a'].get('location'))}` against B `{md(d['b'].get('location'))}`: "
           + ("no differences" if d.get("identical") else "they differ") + f"; card fields {num(s.get('card_fields'))}"
           f", tensors changed {num(s.get('tensors_changed'))}."]
    data, fwd = d.get("data"), d.get("forward")
    if data:
        out += ["", f"Weights: {num(data['compared'])} tensors compared, {num(data['differing'])} differ; flagged "
                f"layers {md(', '.join(data['flagged_layers']) or 'none')}.", "",
                "| layer | rel error | max error | cosine | outliers |", "|---|---|---|---|---|"]
        out += [f"| {md(r['layer'])} | {num(r['rel_error'], '.3e')} | {num(r['max_error'], '.3e')} | "
                f"{num(r['cosine'], '.6f')} | {num(r['outlier_share'], '.2%')} |" for r in data["layers"]]
    if fwd:
        lg = fwd.get("logits", {})
        out += ["", f"Forward on {num(fwd.get('tokens'))} tokens: " + (md(lg["error"]) if "error" in lg else
                f"mean KLD {num(lg['mean_kld'], '.6f')}, 99.9% KLD {num(lg['kld_99_9'], '.6f')}, RMS Δp "
                f"{num(lg['rms_delta_p'], '.3%')}, same top p {num(lg['same_top_p'], '.3%')}.")]
    return out
