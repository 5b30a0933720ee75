"""Human-readable memory plans (rich)."""

from __future__ import annotations

from rich.table import Table

from archprobe.cli.render import human_bytes
from archprobe.cli.textsafe import SafeConsole, line


def render_memory(plans: list[dict], budget: int | None, fits: int | None, plot: str | None) -> None:
    c = SafeConsole()
    kinds = sorted({k for p in plans for k in p["cache_by_layer_type"]})
    t = Table(title=f"Peak memory, batch {plans[0]['batch']}, weights {plans[0]['weight_dtype']}, "
                    f"KV {plans[0]['kv_dtype']}")
    t.add_column("context", justify="right")
    t.add_column("weights", justify="right")
    for k in kinds:
        t.add_column(f"cache {k}", justify="right")
    t.add_column("activations", justify="right")
    t.add_column("peak", justify="right")
    if "per_device_peak_bytes" in plans[0]:
        t.add_column(f"per device (/{plans[0]['devices']})", justify="right")
    for p in plans:
        row = [f"{p['context']:,}", human_bytes(p["weights_bytes"])]
        row += [human_bytes(p["cache_by_layer_type"].get(k, 0)) for k in kinds]
        row += [human_bytes(p["activation_bytes"]), human_bytes(p["peak_bytes"])]
        if "per_device_peak_bytes" in p:
            row.append(human_bytes(p["per_device_peak_bytes"]))
        t.add_row(*row)
    c.print(t)
    for a in plans[-1]["assumptions"]:
        c.print(line("  ", ("assumes:", "dim"), f" {a}"))
    if budget is not None:
        c.print(f"budget {human_bytes(budget)}: " + (f"largest context that fits: {fits:,} tokens" if fits
                                                      else "does not fit even at 1 token"))
    if plot:
        c.print(f"plot written to {plot}")
