"""Terminal rendering of the eval documents: reports and audits (rich), runs, comparisons, chains."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from archprobe.cli.errors import one_line
from archprobe.cli.textsafe import SafeConsole, line, styled
from archprobe.eval.html import pct

STATUS_STYLE = {"met": "green", "not_met": "red", "unknown": "yellow"}


def render_report(r: dict, html: str | None = None) -> None:
    """The report; `html`: where `eval report --html` also wrote it."""
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
    if html:
        typer.echo(f"html: {html}")


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


def render_run(doc: dict, ledger: str) -> None:
    """`eval run`: the report, then where it is kept."""
    render_report(doc)
    typer.echo(f"ledger: {ledger}   report again: archprobe eval report {doc['run_id']} --ledger {ledger}")


def render_intervention(doc: dict) -> None:
    typer.echo(f"recorded {doc['kind']} on {doc['attempt_id']}")


def render_runs(doc: dict) -> None:
    for r in doc["runs"]:
        typer.echo(one_line(f"{r['run_id']}  {r['source']}  {r['model']}  {r['attempts_per_task']}x  "
                            f"{r['task_set_hash'][:19]}"))


def render_compare(doc: dict) -> None:
    typer.echo(f"{doc['tasks']} tasks; success B - A = {doc['mean_difference']:+.3f} "
               f"[{doc['ci95'][0]:+.3f}, {doc['ci95'][1]:+.3f}] ({doc['method']}); p = {doc['p_value']:.3g}")


def render_imported(doc: dict) -> None:
    typer.echo(f"imported as {doc['run_id']}; archprobe eval report {doc['run_id']} --ledger {doc['ledger']}")


def render_verify(doc: dict) -> None:
    """One line per run's chain, one per break."""
    for r in doc["runs"]:
        state = "intact" if r["ok"] else f"BROKEN at {len(r['breaks'])} place(s)"
        typer.echo(one_line(f"run {r['run_id']}: {r['rows']} rows, chain {state}; head {r['head']['hash']}"))
        for b in r["breaks"]:
            typer.echo(one_line(f"  seq {b['seq']}  {b['key'] or '-'}: {b['problem']}"))


def render_exported(doc: dict) -> None:
    typer.echo(f"exported {doc['rows']} rows of {doc['run_id']} to {doc['written']}; head {doc['head']['hash']}")
