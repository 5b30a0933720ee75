"""Memory vs context per layer type (stacked areas), with the device budget as a line."""

from __future__ import annotations


def plot_sweep(plans: list[dict], path: str, budget: int | None, title: str, devices: int = 1) -> None:
    try:
        import matplotlib
    except ImportError:
        from archprobe.errors import ArchprobeError

        raise ArchprobeError("--plot needs matplotlib", hint="pip install 'archprobe[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p["context"] for p in plans]
    gib = 2 ** 30
    div = devices if devices > 1 else 1
    layers = [("weights", [p["weights_bytes"] / div / gib for p in plans])]
    kinds = sorted({k for p in plans for k in p["cache_by_layer_type"]})
    layers += [(f"cache: {k}", [p["cache_by_layer_type"].get(k, 0) / gib for p in plans]) for k in kinds]
    layers.append(("activations", [p["activation_bytes"] / gib for p in plans]))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=110)
    for k in kinds:  # right: the per-sequence caches alone, where the layer types differ
        ax2.plot(xs, [p["cache_by_layer_type"].get(k, 0) / gib for p in plans], marker=".", label=k)
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("context (tokens)")
    ax2.set_ylabel("GiB (all sequences)")
    ax2.set_title("cache / state per layer type")
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    ax.stackplot(xs, *[v for _, v in layers], labels=[n for n, _ in layers], alpha=0.85)
    if budget is not None:
        ax.axhline(budget / gib, color="red", linestyle="--", label=f"budget {budget / gib:.0f} GiB")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("GiB" + (f" per device (/{devices})" if devices > 1 else ""))
    ax.set_title(f"peak memory vs context — {title}, batch {plans[0]['batch']}")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
