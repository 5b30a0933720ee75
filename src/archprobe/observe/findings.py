"""What the terminal summary calls unusual, from an archprobe.observe/1 document. Each finding is a
warning (something is likely wrong: NaN, duplicates, outliers, dead or collapsed experts) or a note (a
property worth knowing: massive activations, a layer that adds nothing)."""

from __future__ import annotations

COLLAPSED_SHARE = 0.99    # one expert chosen by this share of the tokens (with E > k): routing collapsed
IMBALANCED = 4.0          # max load / mean load above this


def _names(items: list[str], n: int = 4) -> str:
    shown = ", ".join(items[:n])
    return shown + (f" (+{len(items) - n} more)" if len(items) > n else "")


def findings(doc: dict) -> list[dict]:
    out: list[dict] = []

    def add(severity: str, message: str) -> None:
        out.append({"severity": severity, "message": message})

    w = doc.get("weights") or {}
    if w.get("nonfinite"):
        add("warning", "NaN/Inf in " + _names([f"{x['tensor']} ({x['count']})" for x in w["nonfinite"]]))
    shapes = {s["tensor"]: s.get("shape", []) for s in w.get("stats", [])}
    zero = [n for n in w.get("all_zero", []) if len(shapes.get(n, [])) >= 2]   # zero biases are an initialisation
    if zero:
        add("warning", "all-zero matrices: " + _names(zero))
    for group in w.get("duplicates", []):
        add("warning", "bit-identical: " + _names(group))
    for o in w.get("outliers", []):
        against = (f"its own median |x| {o['sibling_max_abs']:.3g}" if o.get("against") == "median_abs" else
                   f"{o['sibling_max_abs']:.3g} in its {o['siblings']} siblings")
        add("warning", f"outlier: {o['tensor']} max |x| {o['max_abs']:.4g} vs {against} "
                       f"({o['share']:.2g} of its values)")
    for d in w.get("duplicate_layers", []):
        add("warning", f"layer {d['layer']} is a bit-identical copy of layer {d['copy_of']} ({d['tensors']} tensors)")
    for d in w.get("duplicate_experts", []):
        add("warning", f"layer {d['layer']}: expert {d['expert']} is a bit-identical copy of expert {d['copy_of']} "
                       f"({d['tensors']} tensors)")
    for r in doc.get("routing", []):
        if r.get("nonfinite_tokens"):     # the layer's input is already NaN/Inf: its choices mean nothing
            continue
        if r["dead"]:
            add("warning", f"layer {r['layer']}: experts never selected on {r['tokens']} tokens: "
                           + _names([str(e) for e in r["dead"]], 8))
        top = max(r["load"]) if r["load"] else 0
        if r["experts"] > r["top_k"] and top >= COLLAPSED_SHARE * r["tokens"]:
            add("warning", f"layer {r['layer']}: expert {r['load'].index(top)} is chosen by {top} of "
                           f"{r['tokens']} tokens (imbalance {r['imbalance']:.3g}, E/k = "
                           f"{r['experts'] / r['top_k']:.3g})")
        elif r["imbalance"] > IMBALANCED:
            add("warning", f"layer {r['layer']}: expert load imbalance {r['imbalance']:.3g} (max/mean)")
    bad = [d["layer"] for d in doc.get("layers_nonfinite", [])]
    if bad:
        add("warning", "non-finite layer outputs from layer " + str(bad[0]))
    massive = [d for d in doc.get("depth", []) if d.get("massive", {}).get("massive")]
    if massive:
        top = max(massive, key=lambda d: d["massive"]["max_abs"])
        m = top["massive"]
        add("note", f"massive activations in layers {massive[0]['layer']}-{massive[-1]['layer']} "
                    f"({len(massive)} layers): largest |x| {m['max_abs']:.4g} at layer {top['layer']}, token "
                    f"{m['token']}, channel {m['channel']} (median |x| {m['median_abs']:.3g})")
    idle = [d["layer"] for d in doc.get("depth", []) if d.get("update_ratio") is not None
            and d["update_ratio"] < 1e-6]
    if idle:
        add("note", "layers that change nothing (cosine 1): " + _names([str(i) for i in idle], 8))
    return out
