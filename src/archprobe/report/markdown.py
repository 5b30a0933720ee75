"""The report as Markdown (for issues, PRs and chat): the same numbers, tables instead of charts."""

from __future__ import annotations

from archprobe.report.html import gib


def render(data: dict) -> str:
    doc, mem = data["inspect"], data["memory"]
    arch, p = doc["architecture"], doc["params"]
    name = doc.get("wrapper_model_type") or doc["model_type"]
    out = [f"# archprobe report: {name}", "", f"Source `{doc['source']['location']}` (config.json and shard headers "
           "only).", "", "## Structure", "", "| | |", "|---|---|",
           f"| architectures | {', '.join(doc.get('architectures') or [])} |",
           f"| layers | {arch['num_layers']} |", f"| hidden size | {arch['hidden_size']} |",
           f"| mixers | {', '.join(f'{k}×{v}' for k, v in arch.get('mixers', {}).items())} |",
           f"| FFNs | {', '.join(f'{k}×{v}' for k, v in arch.get('ffns', {}).items())} |",
           f"| experts (top-k) | {arch.get('num_experts')} ({arch.get('top_k')}) |",
           f"| parameters total | {p['total']:,} |", f"| parameters active | {p['active']:,} |", "",
           "## Detected features", "", "| feature | confidence | layers | evidence |", "|---|---|---|---|"]
    for f in doc["features"]:
        ev = f["evidence"][0] if f["evidence"] else {}
        layers = f.get("layers") or []
        out.append(f"| {f['id']} | {f['confidence']:.2f} | {', '.join(map(str, layers[:12]))}"
                   f"{' …' if len(layers) > 12 else ''} | `{ev.get('tensor', '')}` {ev.get('shape') or ''} |")
    out += ["", "## Layer plan", "", "| layer | mixer | FFN | residual |", "|---|---|---|---|"]
    out += [f"| {la['index']} | {la['mixer']} | {la['ffn']} | {la['residual']} |" for la in doc["layers"]]
    out += ["", "## Parameters by component", "", "| component | parameters |", "|---|---|"]
    out += [f"| {k} | {v:,} |" for k, v in sorted(p["by_component"].items(), key=lambda kv: -kv[1])]
    out += ["", "## Memory", "", f"At {mem['context']:,} tokens × batch {mem['batch']}: peak {gib(mem['peak_bytes'])} "
            f"({mem['peak_bytes']:,} bytes) = weights {gib(mem['weights_bytes'])} + caches {gib(mem['cache_bytes'])} + "
            f"activations {gib(mem['activation_bytes'])}.", "", "| context | peak | caches |", "|---|---|---|"]
    out += [f"| {s['context']:,} | {gib(s['peak_bytes'])} | {gib(s['cache_bytes'])} |" for s in data["sweep"]]
    if data.get("budget_bytes"):
        out += ["", f"Budget {gib(data['budget_bytes'])}: largest fitting context "
                f"{data['largest_fitting_context']:,} tokens."]
    ad = data.get("adapt") or {}
    out += ["", "## Adaptation", ""]
    if ad.get("frameworks"):
        out += ["| framework | version | status | missing |", "|---|---|---|---|"]
        out += [f"| {r['framework']} | {r['version'] or ''} | {r['status']} | {', '.join(r['missing'])} |"
                for r in ad["frameworks"]]
    else:
        out.append(str(ad.get("error", "not run")))
    v = data.get("validate")
    out += ["", "## Validation", ""]
    if v:
        out.append(f"Status **{v['status']}**; {v.get('mapped_tensors', 0):,} tensors mapped.")
        out += ["", "| layer | kind | rms | max abs | finite |", "|---|---|---|---|---|"]
        out += [f"| {s['index']} | {s['kind']} | {s['out_rms']:.4g} | {s['max_abs']:.4g} | {s['finite']} |"
                for s in v.get("layers", [])]
    else:
        out.append("Not run (`archprobe report --validate`).")
    return "\n".join(out) + "\n"
