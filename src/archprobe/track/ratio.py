"""Ratios between two series of the same kind; a reach-vs-usage ratio is refused with the reason."""

from __future__ import annotations

from archprobe.errors import ArchprobeError
from archprobe.track.signals import refuse_mixing


def find(all_series: list[dict], metric: str) -> dict:
    matches = [s for s in all_series if s["metric"] == metric]
    if not matches:
        known = sorted({s["metric"] for s in all_series})
        raise ArchprobeError(f"no series named {metric!r}", hint="recorded: " + ", ".join(known) if known else None)
    return matches[0]


def ratio(all_series: list[dict], spec: str) -> dict:
    if spec.count("/") != 1:
        raise ArchprobeError(f"--ratio {spec!r}: write it as METRIC_A/METRIC_B")
    a_name, b_name = spec.split("/")
    a, b = find(all_series, a_name.strip()), find(all_series, b_name.strip())
    refuse_mixing(a["kind"], b["kind"], f"the ratio {spec}")
    b_at = dict((t, v) for t, v in b["points"])
    points = [[t, v / b_at[t]] for t, v in a["points"] if b_at.get(t)]
    return {"kind": a["kind"], "metric": f"{a['metric']}/{b['metric']}", "source": a["source"],
            "labels": {}, "points": points}
