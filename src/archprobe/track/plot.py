"""Each series in its own panel: reach panels first, then usage panels, never on a shared axis."""

from __future__ import annotations

from datetime import datetime


def plot_series(all_series: list[dict], path: str, subject: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ordered = sorted(all_series, key=lambda s: (("reach", "usage", "adaptation").index(s["kind"]) if s["kind"] in
                                               ("reach", "usage", "adaptation") else 3, s["source"], s["metric"]))
    n = max(1, len(ordered))
    fig, axes = plt.subplots(n, 1, figsize=(8, 2.2 * n), squeeze=False)
    for ax, s in zip(axes[:, 0], ordered, strict=False):
        xs = [datetime.fromtimestamp(t) for t, _ in s["points"]]
        ys = [v for _, v in s["points"]]
        color = {"reach": "#3a7bd5", "adaptation": "#3aa35a"}.get(s["kind"], "#d5793a")
        ax.plot(xs, ys, marker="o", color=color)
        label = s["metric"] + (f" {s['labels']}" if s["labels"] else "")
        ax.set_title(f"{s['kind']}: {label} — {s['source']}", fontsize=9, loc="left")
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{subject}: reach, usage and adaptation, each on its own axis (never combined)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
