"""Each series in its own panel: reach panels first, then usage panels, never on a shared axis."""

from __future__ import annotations

from datetime import datetime

from archprobe.formats.limits import MAX_PLOT_PANELS as MAX_PANELS
from archprobe.formats.limits import MAX_PLOT_POINTS as MAX_POINTS


def plotted(all_series: list[dict]) -> tuple[int, int]:
    """(series drawn, series left out) for `plot_series`, so the command can say what was left out."""
    return min(len(all_series), MAX_PANELS), max(0, len(all_series) - MAX_PANELS)


def plot_series(all_series: list[dict], path: str, subject: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = ("reach", "usage", "adaptation")
    ordered = sorted(all_series, key=lambda s: (kinds.index(s["kind"]) if s["kind"] in kinds else 3,
                                                s["source"], s["metric"]))
    left_out = max(0, len(ordered) - MAX_PANELS)
    ordered = ordered[:MAX_PANELS]
    n = max(1, len(ordered))
    fig, axes = plt.subplots(n, 1, figsize=(8, 2.2 * n), squeeze=False)
    for ax, s in zip(axes[:, 0], ordered, strict=False):
        points = s["points"][-MAX_POINTS:]
        xs = [datetime.fromtimestamp(t) for t, _ in points]
        ys = [v for _, v in points]
        color = {"reach": "#3a7bd5", "adaptation": "#3aa35a"}.get(s["kind"], "#d5793a")
        ax.plot(xs, ys, marker="o", color=color)
        label = s["metric"] + (f" {s['labels']}" if s["labels"] else "")
        ax.set_title(f"{s['kind']}: {label} — {s['source']}", fontsize=9, loc="left")
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{subject}: reach, usage and adaptation, each on its own axis (never combined)"
                 + (f"; {left_out:,} more series left out (the first {MAX_PANELS} are drawn)" if left_out else ""),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
