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
    d = r.get("denominators") or {}
    c.print(line("success rate ", (pct(r["success_rate"]), "bold"),
                 f" of {d.get('scored')} scored  95% [{pct(r['ci95'][0])}, {pct(r['ci95'][1])}] "
                 f"({r['ci_method']});  {pct(r.get('success_rate_errors_as_failures'))} of {d.get('settled')} "
                 f"settled with {d.get('unscored_errors')} error(s) and {d.get('unscored_timeouts')} timeout(s) "
                 "counted as failures"))
    if r.get("faults"):
        c.print("not passed, by where it arose: " + ", ".join(f"{k} {v}" for k, v in r["faults"].items()))
    money = "unknown (no --price, or a count the server did not report)" if r.get("cost_usd") is None else \
        f"${r['cost_usd']:.4f}"
    c.print(f"minutes {r.get('minutes', 0):.2f}   dollars {money}")
    ch = r.get("chain") or {}
    c.print(line("ledger chain: ", ("intact", "green") if ch.get("ok") else ("BROKEN", "red"),
                 "" if ch.get("ok") else " (archprobe eval verify)",
                 f", {ch.get('rows')} rows, head {(ch.get('head') or {}).get('hash')}"))
    for b in (ch.get("breaks") or [])[:20]:
        c.print(styled(f"  chain break at seq {b['seq']} {b['key'] or ''}: {b['problem']}", "red"))
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
