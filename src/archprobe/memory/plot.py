"""Memory vs context on the busiest device: weights, reserves and activations stacked against the usable
budget (left), and the caches per layer type on their own scale (right), in units that read."""

from __future__ import annotations

UNITS = [(2 ** 40, "TiB"), (2 ** 30, "GiB"), (2 ** 20, "MiB"), (2 ** 10, "KiB"), (1, "B")]


def unit_for(largest: float) -> tuple[float, str]:
    """The largest unit in which `largest` is at least 1 (so ticks read 1.6 TiB, not 1.6e+03 GiB)."""
    for div, name in UNITS:
        if largest >= div:
            return div, name
    return 1, "B"


def plot_sweep(plans: list[dict], path: str, title: str) -> None:
    try:
        import matplotlib
    except ImportError:
        from archprobe.errors import ArchprobeError

        raise ArchprobeError("--plot needs matplotlib", hint="pip install 'archprobe[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p["context"] for p in plans]
    busiest = [max(p["per_device"], key=lambda r: r["peak_bytes"]) for p in plans]
    parts = [("weights", [b["weights_bytes"] for b in busiest]),
             ("engine reserve", [b["overhead_bytes"] for b in busiest]),
             ("activations", [b["activation_bytes"] for b in busiest]),
             ("cache (all layer types)", [b["cache_bytes"] for b in busiest])]
    parts = [(n, v) for n, v in parts if any(v)]
    usable = plans[-1].get("usable_device_bytes")
    top = max([sum(col) for col in zip(*[v for _, v in parts], strict=True)] + [usable or 0])
    div, unit = unit_for(top)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=110)
    ax.stackplot(xs, *[[x / div for x in v] for _, v in parts], labels=[n for n, _ in parts], alpha=0.85)
    if usable:
        ax.axhline(usable / div, color="red", linestyle="--", label=f"usable {usable / div:.3g} {unit}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel(f"{unit} on the busiest device")
    dev = plans[-1].get("device") or {}
    lay = plans[-1]["layout"]
    where = " x ".join(f"{k.upper()}{v}" for k, v in lay.items() if k != "pp_layers" and v > 1) or "1 device"
    ax.set_title(f"{title}: {plans[-1]['devices']} x {dev.get('label', dev.get('name', 'device'))} ({where}), "
                 f"batch {plans[0]['batch']}", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    kinds = sorted({k for p in plans for k in p["cache_by_layer_type"]})
    cmax = max([p["cache_by_layer_type"].get(k, 0) for p in plans for k in kinds] + [1])
    cdiv, cunit = unit_for(cmax)
    for k in kinds:   # right: the caches alone, on their own scale, where the layer types differ
        ax2.plot(xs, [p["cache_by_layer_type"].get(k, 0) / cdiv for p in plans], marker=".", label=k)
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("context (tokens)")
    ax2.set_ylabel(f"{cunit} (all sequences, one model copy)")
    ax2.set_title("cache / state per layer type", fontsize=9)
    if kinds:
        ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
