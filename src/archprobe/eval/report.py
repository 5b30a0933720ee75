"""The run report (schema archprobe.eval-report/1): outcomes, rates with intervals, the nine checks,
and every attempt, failures included (C3). Built from the ledger only, so it can be re-made any time.
"""

from __future__ import annotations

import math
from pathlib import Path

from archprobe.eval import stats
from archprobe.eval.checks import Evidence, nine_checks, verdict
from archprobe.eval.ledger import OUTCOMES, Ledger
from archprobe.eval.slot import load_slots

SCHEMA = "archprobe.eval-report/1"


def build_report(ledger: Ledger, run_id: str, ci: str = "auto", other_ledgers: list[Ledger] = ()) -> dict:
    run = ledger.run(run_id)
    rows = ledger.attempts(run_id)
    task_ids = ledger.task_ids(run_id)
    params = run["params"]
    max_retries = params.get("max_retries", 0)
    slots = load_slots(rows, task_ids, run["attempts_per_task"])
    interventions = ledger.interventions(run_id)
    assisted_ids = {i["attempt_id"] for i in interventions}
    tracked = run["interventions_tracked"]

    outcomes = dict.fromkeys(OUTCOMES, 0)
    for r in rows:
        if r.outcome in outcomes:   # a row edited to another word is not counted (verify names it)
            outcomes[r.outcome] += 1
    per_task, scored_by_task, split = [], [], {"unassisted": [0, 0], "assisted": [0, 0]}
    unsettled = 0
    by_task: dict[str, list] = {}
    for s in slots:   # grouped once: a scan per task was O(tasks x slots) (100k tasks: 235 s)
        by_task.setdefault(s.task_id, []).append(s)
    for tid in task_ids:
        mine = by_task.get(tid, [])
        finals = [s.chain[-1] for s in mine if s.settled(max_retries)]
        unsettled += sum(1 for s in mine if not s.settled(max_retries))
        scored = [f for f in finals if f.outcome in ("pass", "fail")]
        passes = sum(f.outcome == "pass" for f in scored)
        for s in mine:
            last = s.chain[-1] if s.chain and s.settled(max_retries) else None
            if last and last.outcome in ("pass", "fail"):
                bucket = "assisted" if any(a.attempt_id in assisted_ids for a in s.chain) else "unassisted"
                split[bucket][0] += last.outcome == "pass"
                split[bucket][1] += 1
        per_task.append({"task_id": tid, "attempts": sum(len(s.chain) for s in mine), "slots": len(mine),
                         "scored": len(scored), "passes": passes,
                         "success_rate": passes / len(scored) if scored else None})
        scored_by_task.append((passes, len(scored)))

    interval = _interval(scored_by_task, ci)
    settled_finals = [s.chain[-1] for s in slots if s.settled(max_retries)]
    unscored = [f for f in settled_finals if f.outcome not in ("pass", "fail")]
    passes_all = sum(f.outcome == "pass" for f in settled_finals)
    costs = [r.cost_usd for r in rows if r.outcome is not None]
    chain_state = ledger.verify(run_id)["runs"][0]
    n_min = min((n for _, n in scored_by_task if n), default=0)
    reruns = independent_reruns(run, [ledger, *other_ledgers])
    incomplete = sum(1 for r in rows if r.outcome is None)
    isolation = _isolation(run, rows, ledger, run_id)
    evidence = Evidence(
        task_hash=run["task_set_hash"], isolated=isolation["isolated"], network_policy=isolation["network"],
        initial_state_reproducible=isolation["initial_state_reproducible"],
        initial_state_detail=isolation["initial_state"],
        interventions=len(interventions) if tracked else None, attempts_total=len(rows), retries_counted=True,
        assisted_labelled=True if tracked else None, assisted_attempts=len(assisted_ids) if tracked else None,
        reruns=reruns, interval=None if math.isnan(interval.rate) else {"ci95": [interval.low, interval.high],
                                                                        "method": interval.method},
        min_scored_per_task=n_min, outcomes_disclosed=True, outcome_counts=outcomes,
        incomplete_attempts=incomplete)
    checks = nine_checks(evidence)
    return {
        "schema": SCHEMA, "run_id": run_id, "source": run["source"], "task_set_hash": run["task_set_hash"],
        "task_set_path": run["task_set_path"], "model": run["model"], "endpoint": run["endpoint"],
        "served_models": params.get("served_models"), "sampling": params.get("sampling"),
        "chat_template_hash": params.get("chat_template_hash"), "host": run["host"], "operator": run["operator"],
        "attempts_per_task": run["attempts_per_task"], "attempts_total": len(rows), "outcomes": outcomes,
        "unsettled_slots": unsettled, "retries": sum(1 for r in rows if r.retry_of),
        "interventions": len(interventions) if tracked else None,
        "assisted_attempts": len(assisted_ids) if tracked else None,
        "success_rate": None if math.isnan(interval.rate) else interval.rate,
        # the same passes over every settled slot, errors and timeouts counted as not passed: a server
        # that errs where it would fail moves this number, and the two side by side show it
        "success_rate_errors_as_failures": passes_all / len(settled_finals) if settled_finals else None,
        "denominators": {"scored": sum(n for _, n in scored_by_task), "settled": len(settled_finals),
                         "unscored_errors": sum(f.outcome == "error" for f in unscored),
                         "unscored_timeouts": sum(f.outcome == "timeout" for f in unscored)},
        "faults": _faults(rows),
        "cost_usd": None if not costs or any(c is None for c in costs) else sum(costs),
        "price": params.get("price"),
        "minutes": sum(r.seconds or 0.0 for r in rows) / 60.0,
        "chain": {"ok": chain_state["ok"], "head": chain_state["head"], "rows": chain_state["rows"],
                  "breaks": chain_state["breaks"]},
        "ci95": [interval.low, interval.high], "ci_method": interval.method,
        "success_rate_unassisted": _rate(*split["unassisted"]), "success_rate_assisted": _rate(*split["assisted"]),
        "pass_at_k": _pass_k(scored_by_task, n_min),
        "per_task": per_task,
        "attempts": [{"attempt_id": r.attempt_id, "task_id": r.task_id, "sample": r.sample, "outcome": r.outcome,
                      "seconds": r.seconds, "minutes": None if r.seconds is None else r.seconds / 60.0,
                      "tokens_in": r.tokens_in, "tokens_out": r.tokens_out, "cost_usd": r.cost_usd,
                      "turns": r.turns, "fault": r.detail.get("fault"), "tampered": r.detail.get("tampered"),
                      "retry_of": r.retry_of, "server_model": r.server_model,
                      "reason": r.detail.get("reason"), "assisted": r.attempt_id in assisted_ids} for r in rows],
        "interventions_list": interventions,
        "isolation": isolation, "independent_reruns": reruns,
        "checks": checks, "verdict": verdict(checks),
    }


def _faults(rows) -> dict:
    """Where the non-passing outcomes arose: model, endpoint, judge, harness."""
    out: dict[str, int] = {}
    for r in rows:
        if r.outcome and r.outcome != "pass":
            key = r.detail.get("fault") or ("interrupted" if r.outcome == "cancelled" else "unattributed")
            out[key] = out.get(key, 0) + 1
    return out


def _rate(passes: int, n: int) -> dict:
    return {"passes": passes, "scored": n, "success_rate": passes / n if n else None}


def _interval(scored_by_task, ci: str) -> stats.Interval:
    tasks = [(p, n) for p, n in scored_by_task if n]
    if ci == "wilson" or (ci == "auto" and len(tasks) <= 1):
        return stats.wilson(sum(p for p, _ in tasks), sum(n for _, n in tasks))
    if ci == "bootstrap":
        return stats.bootstrap(tasks)
    return stats.clustered(tasks)


def _pass_k(scored_by_task, n_min: int) -> dict | None:
    tasks = [(p, n) for p, n in scored_by_task if n]
    if not tasks or n_min < 1:
        return None
    ks = sorted({1, n_min})
    return {"n_per_task_min": n_min, "tasks": len(tasks),
            "pass@k": {str(k): sum(stats.pass_at_k(n, p, k) for p, n in tasks) / len(tasks) for k in ks},
            "pass^k": {str(k): sum(stats.pass_hat_k(n, p, k) for p, n in tasks) / len(tasks) for k in ks}}


def independent_reruns(run: dict, ledgers: list[Ledger]) -> list[dict]:
    """Other runs of the same model on the same task hash by another operator or host (C1)."""
    found = []
    for ledger in ledgers:
        for other in ledger.runs():
            if other["run_id"] == run["run_id"] and ledger is ledgers[0]:
                continue
            if other["task_set_hash"] != run["task_set_hash"] or other["model"] != run["model"]:
                continue
            if (other["host"], other["operator"]) == (run["host"], run["operator"]):
                continue
            scored = sum(1 for a in ledger.attempts(other["run_id"]) if a.outcome in ("pass", "fail"))
            if scored:
                found.append({"run_id": other["run_id"], "by": other["operator"], "host": other["host"],
                              "task_hash": other["task_set_hash"], "scored_attempts": scored,
                              "ledger": str(ledger.path)})
    return found


def _isolation(run: dict, rows, ledger: Ledger, run_id: str) -> dict:
    if run["source"] != "archprobe":
        return {"isolated": None, "network": None, "initial_state_reproducible": None,
                "initial_state": f"imported from {run['source']}: not recorded"}
    tasks = ledger.task_contents(run_id)
    agentic = {t for t, c in tasks.items() if c.get("repo")}
    policies = sorted({(r.detail.get("test") or {}).get("network") for r in rows
                       if r.task_id in agentic and r.detail.get("test")} - {None})
    start_ok = all(r.detail.get("workspace_start_hash") == tasks[r.task_id].get("repo_hash") for r in rows
                   if r.task_id in agentic and r.outcome in ("pass", "fail", "timeout"))
    seed = run["params"].get("seed")
    parts = []
    if seed is not None:
        parts.append(f"seed pinned per sample (base {seed}), sampling {run['params'].get('sampling')}")
    if agentic:
        parts.append("starting repository copied fresh and its tree hash checked before every agentic attempt"
                     + ("" if start_ok else " (MISMATCH seen)"))
    chat = "chat tasks: each attempt a fresh stateless request (no shared conversation or tools)"
    network = "; ".join([chat, *(f"agentic test commands: {p}" for p in policies)]) if tasks else None
    return {"isolated": True, "network": network,
            "initial_state_reproducible": bool(parts) and start_ok,
            "initial_state": "; ".join(parts) or "no seed pinned"}


def write_html(report: dict, path: str | Path) -> Path:
    from archprobe.eval.html import render_html

    out = Path(path)
    out.write_text(render_html(report))
    return out
