"""Paired comparison of two runs on the same task set (same task hash, same task ids)."""

from __future__ import annotations

from archprobe.errors import ArchprobeError
from archprobe.eval.ledger import Ledger
from archprobe.eval.report import build_report
from archprobe.eval.stats import paired_difference


def compare_runs(ledger: Ledger, run_a: str, run_b: str) -> dict:
    a, b = build_report(ledger, run_a), build_report(ledger, run_b)
    if a["task_set_hash"] != b["task_set_hash"]:
        raise ArchprobeError(f"runs {run_a} and {run_b} used different task sets "
                             f"({a['task_set_hash'][:19]} vs {b['task_set_hash'][:19]})",
                             hint="a paired comparison needs the same task hash")
    rates_a = {t["task_id"]: t["success_rate"] for t in a["per_task"]}
    rates_b = {t["task_id"]: t["success_rate"] for t in b["per_task"]}
    common = [t for t in rates_a if rates_a[t] is not None and rates_b.get(t) is not None]
    if len(common) < 2:
        raise ArchprobeError("fewer than two tasks have scored attempts in both runs")
    p = paired_difference([rates_a[t] for t in common], [rates_b[t] for t in common])
    return {"schema": "archprobe.eval-compare/1", "run_a": run_a, "run_b": run_b, "model_a": a["model"],
            "model_b": b["model"], "task_set_hash": a["task_set_hash"], "tasks": p.tasks,
            "success_rate_a": a["success_rate"], "success_rate_b": b["success_rate"],
            "mean_difference": p.mean_difference, "ci95": [p.low, p.high], "p_value": p.p_value, "method": p.method}
