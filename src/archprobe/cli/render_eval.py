"""Terminal rendering of eval reports and audits (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from archprobe.cli.textsafe import SafeConsole, line, styled
from archprobe.eval.html import pct

STATUS_STYLE = {"met": "green", "not_met": "red", "unknown": "yellow"}


def render_report(r: dict) -> None:
    c = SafeConsole()
    c.print(line((f"run {r['run_id']}", "bold"), f"  model {r['model']}  at {r['endpoint']}"))
    c.print(f"task set {r['task_set_hash']}  ({r['attempts_per_task']} attempt(s) per task)")
    o = r["outcomes"]
    c.print("outcomes: " + "  ".join(f"{k} {v}" for k, v in o.items())
            + f"   attempts in all {r['attempts_total']}, retries {r['retries']}, interventions "
            + ("unknown" if r["interventions"] is None else str(r["interventions"])))
    c.print(line("success rate ", (pct(r["success_rate"]), "bold"), f"  95% [{pct(r['ci95'][0])}, "
                 f"{pct(r['ci95'][1])}] ({r['ci_method']})"))
    if r.get("pass_at_k"):
        pk = r["pass_at_k"]
        c.print("pass@k " + ", ".join(f"k={k}: {v:.3f}" for k, v in pk["pass@k"].items()) + "   pass^k "
                + ", ".join(f"k={k}: {v:.3f}" for k, v in pk["pass^k"].items()) + f"   (n >= {pk['n_per_task_min']})")
    if r["unsettled_slots"]:
        c.print(styled(f"{r['unsettled_slots']} slot(s) not settled: resume with --run-id {r['run_id']}", "yellow"))
    t = Table("task", "attempts", "scored", "passes", "rate")
    for p in r["per_task"]:
        t.add_row(p["task_id"], str(p["attempts"]), str(p["scored"]), str(p["passes"]), pct(p["success_rate"]))
    c.print(t)
    render_checks(r, console=c)


def render_checks(doc: dict, title: str | None = None, console: Console | None = None) -> None:
    c = console or SafeConsole()
    if title:
        c.print(styled(title, "bold"))
    t = Table("check", "status", "evidence")
    for k, v in doc["checks"].items():
        t.add_row(k, styled(v["status"], STATUS_STYLE.get(v["status"], "")), v["evidence"])
    c.print(t)
    style = "green" if doc["verdict"] == "capability_conclusion" else "yellow"
    c.print(line("verdict: ", (doc["verdict"], f"bold {style}")))
