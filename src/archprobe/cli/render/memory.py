"""Human-readable memory plans and sizing answers (rich)."""

from __future__ import annotations

from rich.table import Table

from archprobe.cli.textsafe import SafeConsole, line
from archprobe.units import human_bytes


def render_memory(plans: list[dict], plot: str | None) -> None:
    c = SafeConsole()
    kinds = sorted({k for p in plans for k in p["cache_by_layer_type"]})
    first = plans[0]
    t = Table(title=f"Peak memory, batch {first['batch']}, weights {first['weight_dtype']}, KV {first['kv_dtype']}")
    t.add_column("context", justify="right")
    t.add_column("weights", justify="right")
    for k in kinds:
        t.add_column(f"cache {k}", justify="right")
    t.add_column("activations", justify="right")
    t.add_column("peak (one copy)", justify="right")
    t.add_column(f"busiest of {first['devices']}", justify="right")
    t.add_column("fits", justify="center")
    for p in plans:
        row = [f"{p['context']:,}", human_bytes(p["weights_bytes"])]
        row += [human_bytes(p["cache_by_layer_type"].get(k, 0)) for k in kinds]
        row += [human_bytes(p["activation_bytes"]), human_bytes(p["peak_bytes"]),
                human_bytes(p["busiest_device_bytes"])]
        row.append("-" if "fits" not in p else ("yes" if p["fits"] else "NO"))
        t.add_row(*row)
    c.print(t)
    p = plans[-1]
    dev = p.get("device")
    lay = p["layout"]
    where = ", ".join(f"{k.upper()}{v}" for k, v in lay.items() if k != "pp_layers" and v > 1) or "one device"
    c.print(line(("layout: ", "bold"), f"{p['devices']} x {dev.get('label', dev['name']) if dev else 'device'} "
                 f"({where})"))
    if "devices_needed" in p:
        c.print(line(("devices needed: ", "bold"), str(p["devices_needed"]) if p["devices_needed"] else
                     "none of up to 1,024 fits"))
    b = max(p["per_device"], key=lambda r: r["peak_bytes"])
    c.print(line(("busiest device: ", "bold"), f"rank {b['rank']}: weights {human_bytes(b['weights_bytes'])} + cache "
                 f"{human_bytes(b['cache_bytes'])} + activations {human_bytes(b['activation_bytes'])} + reserve "
                 f"{human_bytes(b['overhead_bytes'])} = {human_bytes(b['peak_bytes'])}"))
    if "usable_device_bytes" in p:
        c.print(line(("usable per device: ", "bold"), f"{human_bytes(p['usable_device_bytes'])}; "
                     + ("fits" if p["fits"] else "does NOT fit")
                     + f"; KV pool {human_bytes(p['kv_pool_bytes'])} (max concurrency {p['max_concurrency']:g} at "
                       f"{p['context']:,} tokens)"))
    if "largest_fitting_context" in p:
        n = p["largest_fitting_context"]
        c.print(line(("largest context that fits: ", "bold"), (f"{n:,} tokens" if n else "none")
                     + f" ({p['largest_fitting_context_why']})"))
    bd = p.get("bounds") or {}
    if bd:
        txt = f"decode reads {human_bytes(bd['decode_bytes_per_token'])} per token"
        if bd.get("decode_tokens_per_s_max") is not None:
            txt += f" -> at most {bd['decode_tokens_per_s_max']:,.1f} tokens/s per sequence"
        txt += f"; prefill {bd['prefill_flops_per_token']:.3g} FLOPs per token"
        if bd.get("prefill_tokens_per_s_max"):
            txt += f" -> at most {bd['prefill_tokens_per_s_max']:,.0f} tokens/s"
        c.print(line(("bounds (upper, not throughput): ", "bold"), txt))
    for a in p["assumptions"]:
        c.print(line("  ", ("assumes:", "dim"), f" {a}"))
    for r in p.get("tradeoffs") or []:
        c.print(line(("trade-off ", "bold"), (r["name"], "bold"), f": {r['formula']}"))
        c.print(line("    ", ", ".join(f"{k} {v:,.4g}" if isinstance(v, float) else f"{k} {v:,}"
                                       for k, v in r["numbers"].items())))
        c.print(line("    ", ("break-even: ", "dim"), r["break_even"]))
    if plot:
        c.print(f"plot written to {plot}")


def render_devices(devices) -> None:
    c = SafeConsole()
    t = Table(title="Named devices (dense tensor FLOP/s)")
    for col in ("name", "device", "memory", "bandwidth", "bf16", "fp8", "source"):
        t.add_column(col, overflow="fold")
    for d in devices:
        t.add_row(d.name, d.label, human_bytes(d.memory_bytes), f"{d.bandwidth_bytes_per_s / 1e12:.3g} TB/s",
                  f"{d.bf16_flops / 1e12:,.0f} TF" if d.bf16_flops else "-",
                  f"{d.fp8_flops / 1e12:,.0f} TF" if d.fp8_flops else "-", d.source)
    c.print(t)
