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
    return "\n".join(out) + "\n"
