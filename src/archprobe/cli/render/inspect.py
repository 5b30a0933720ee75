"""Human-readable rendering of the inspect document (rich tables)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from archprobe.cli.textsafe import SafeConsole, line, styled
from archprobe.kinds import label
from archprobe.units import human_bytes


def human_count(n: int | float | None) -> str:
    if n is None:
        return "-"
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return str(int(n))


def compress_runs(tokens: list[str]) -> str:
    """'A A A B A A A B B' -> '[A×3, B]×2, B': run-length, then repeated groups of runs."""
    runs: list[tuple[str, int]] = []
    for t in tokens:
        if runs and runs[-1][0] == t:
            runs[-1] = (t, runs[-1][1] + 1)
        else:
            runs.append((t, 1))
    fmt = [f"{t}×{n}" if n > 1 else t for t, n in runs]
    out, i = [], 0
    while i < len(fmt):
        best = (1, 1)
        for period in range(2, 5):
            reps = 1
            while fmt[i + reps * period: i + (reps + 1) * period] == fmt[i: i + period]:
                reps += 1
            if reps > 1 and reps * period > best[0] * best[1]:
                best = (period, reps)
        period, reps = best
        if reps > 1:
            out.append(f"[{', '.join(fmt[i:i + period])}]×{reps}")
            i += period * reps
        else:
            out.append(fmt[i])
            i += 1
    return ", ".join(out)


def render_inspect(doc: dict, console: Console | None = None) -> None:
    """Every value from the checkpoint reaches the terminal as inert text (cli/textsafe.py)."""
    c = console or SafeConsole()
    src = doc["source"]
    title = f"{doc['model_type']}" + (f" (in {doc['wrapper_model_type']})" if doc.get("wrapper_model_type") else "")
    c.print(line((title, "bold"), f"  {src['kind']}: {src['location']}" + (f"@{src['revision']}" if src["revision"]
                                                                           else "")))
    a, p, s = doc["architecture"], doc["params"], doc["storage"]
    t = Table(title="Architecture", show_header=False, box=None)
    for k in ("num_layers", "hidden_size", "vocab_size", "num_heads", "num_kv_heads", "head_dim", "kv_lora_rank",
              "q_lora_rank", "num_experts", "top_k", "num_shared_experts", "moe_intermediate_size", "latent_size",
              "intermediate_size", "max_position_embeddings"):
        if a.get(k) is not None:
            t.add_row(k, f"{a[k]:,}" if isinstance(a[k], int) else str(a[k]))
    c.print(t)
    mixers = [label(layer["mixer"]) for layer in doc["layers"]]
    ffns = [label(layer["ffn"]) for layer in doc["layers"]]
    c.print(line(("Layer plan", "bold"), f" ({len(mixers)} layers)"))
    c.print(f"  mixers: {compress_runs(mixers)}")
    c.print(f"  ffn:    {compress_runs(ffns)}")
    res = sorted({layer["residual"] for layer in doc["layers"]})
    c.print(f"  residual: {', '.join(res)}")
    pt = Table(title=f"Parameters: total {human_count(p['total'])} ({p['total']:,}), "
                     f"active {human_count(p['active'])} ({p['active']:,})")
    pt.add_column("component")
    pt.add_column("params", justify="right")
    for k, v in p["by_component"].items():
        pt.add_row(k, human_count(v))
    c.print(pt)
    st = Table(title=f"Storage: {s['files']} file(s), {human_bytes(s['bytes'])}, {s['tensors']:,} tensors, "
                     f"{human_bytes(s['header_bytes_read'])} of headers read")
    st.add_column("dtype")
    st.add_column("bytes", justify="right")
    for k, v in s["dtypes"].items():
        st.add_row(k, human_bytes(v))
    for q in doc["quantization"]:
        st.add_row(styled(f"quant {q['scheme']}", "cyan"),
                   f"{q['tensors']:,} tensors, {q['bits']} bits, group {q['group_size']}")
    c.print(st)
    ft = Table(title="Features (evidence: the checkpoint's own tensors and config keys)")
    ft.add_column("feature")
    ft.add_column("conf", justify="right")
    ft.add_column("layers", justify="right")
    ft.add_column("attrs")
    ft.add_column("evidence")
    for f in doc["features"]:
        attrs = ", ".join(f"{k}={v}" for k, v in f["attrs"].items() if v is not None and k != "layers")
        e = f["evidence"][0]
        shape = f" {e['shape']}" if e.get("shape") is not None else ""
        ft.add_row(f["id"], f"{f['confidence']:.2f}", str(len(f["layers"])) if f["layers"] else "model",
                   attrs, f"{e['tensor']}{shape}: {e['why']}")
    c.print(ft)
    for u in doc["unrecognized"]:
        c.print(line(("unrecognized", "yellow"), f" {u['pattern']} ({u['tensors']} tensors)"))
    for w in doc["warnings"]:
        c.print(line(("warning", "yellow"), f" {w}"))
