"""The nine checks (T1-T3, E1-E3, C1-C3) and the verdict, from evidence of any origin.

One function decides for every source: a run in our ledger, an imported Inspect AI log, or a claim
someone wrote down from a post. Each check is `met`, `not_met` or `unknown`, with the evidence in
words. Missing evidence is never read as a pass: interventions not recorded are `unknown`, not 0;
an undisclosed number of attempts fails E2 and C2 by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archprobe.errors import ArchprobeError

CHECKS = ("T1", "T2", "T3", "E1", "E2", "E3", "C1", "C2", "C3")
MET, NOT_MET, UNKNOWN = "met", "not_met", "unknown"


@dataclass
class Evidence:
    """What is known about a result. None always means "not stated"."""

    task_hash: str | None = None
    task_fixed: bool | None = None
    isolated: bool | None = None
    network_policy: str | None = None
    initial_state_reproducible: bool | None = None
    initial_state_detail: str | None = None
    interventions: int | None = None
    attempts_total: int | None = None
    successes: int | None = None
    retries_counted: bool | None = None
    assisted_labelled: bool | None = None
    assisted_attempts: int | None = None
    reruns: list[dict] | None = None          # [{"by", "host", "task_hash", "run_id"}]
    interval: dict | None = None              # {"ci95": [lo, hi], "method": str}
    min_scored_per_task: int | None = None
    outcomes_disclosed: bool | None = None
    outcome_counts: dict | None = None
    incomplete_attempts: int = 0
    notes: list[str] = field(default_factory=list)


def nine_checks(ev: Evidence) -> dict:
    checks = {
        "T1": _t1(ev), "T2": _t2(ev), "T3": _t3(ev), "E1": _e1(ev), "E2": _e2(ev), "E3": _e3(ev),
        "C1": _c1(ev), "C2": _c2(ev), "C3": _c3(ev),
    }
    return {k: {"status": s, "evidence": e} for k, (s, e) in checks.items()}


def verdict(checks: dict) -> str:
    return "capability_conclusion" if all(c["status"] == MET for c in checks.values()) else "methodological_lead"


def failing(checks: dict) -> list[str]:
    return [k for k in CHECKS if checks[k]["status"] != MET]


def _t1(ev):
    if ev.task_hash:
        return MET, f"task content hash {ev.task_hash}"
    if ev.task_fixed is True:
        return MET, "the task is stated to be fixed (no hash published)"
    if ev.task_fixed is False:
        return NOT_MET, "the task was not fixed in advance"
    return UNKNOWN, "no task hash or fixed task definition is given"


def _t2(ev):
    if ev.isolated is True:
        return MET, "each attempt in a fresh environment; network: " + (ev.network_policy or "not stated")
    if ev.isolated is False:
        return NOT_MET, "attempts shared an environment"
    return UNKNOWN, "the environment of the attempts is not described"


def _t3(ev):
    if ev.initial_state_reproducible is True:
        return MET, ev.initial_state_detail or "the starting state is stated to be reproducible"
    if ev.initial_state_reproducible is False:
        return NOT_MET, ev.initial_state_detail or "the starting state is not reproducible"
    return UNKNOWN, "no starting-state hash, seed or parameters are given"


def _e1(ev):
    if ev.interventions is None:
        return UNKNOWN, "human interventions were not recorded (unknown, not zero)"
    return MET, f"{ev.interventions} intervention(s) recorded"


def _e2(ev):
    if ev.attempts_total is None:
        what = f"{ev.successes} success(es)" if ev.successes is not None else "the result"
        return NOT_MET, f"{what} out of an undisclosed number of attempts"
    if ev.retries_counted is False:
        return NOT_MET, f"{ev.attempts_total} attempts stated, but failed retries are not counted"
    return MET, f"n = {ev.attempts_total} attempts, errored, timed-out and retried ones included"


def _e3(ev):
    if ev.assisted_labelled is True:
        n = "" if ev.assisted_attempts is None else f": {ev.assisted_attempts} assisted attempt(s), reported apart"
        return MET, "assisted attempts are labelled" + n
    if ev.assisted_labelled is False:
        return NOT_MET, "assisted and unassisted attempts are mixed"
    if ev.interventions == 0:
        return MET, "no human help was recorded, so none needed labelling"
    return UNKNOWN, "whether any attempt had human help is not stated"


def _c1(ev):
    independent = [r for r in ev.reruns or [] if not ev.task_hash or not r.get("task_hash")
                   or r.get("task_hash") == ev.task_hash]
    if independent:
        who = ", ".join(f"{r.get('by') or '?'}@{r.get('host') or '?'}"
                        + (f" ({r['run_id']})" if r.get("run_id") else "") for r in independent)
        return MET, f"re-run independently on the same task: {who}"
    return NOT_MET, "no independent re-run on the same task is known"


def _c2(ev):
    if ev.attempts_total is None:
        return NOT_MET, "no variance can be estimated from an undisclosed number of attempts"
    if ev.interval is None:
        return NOT_MET, "no confidence interval or pass@k with n is reported"
    if ev.min_scored_per_task is not None and ev.min_scored_per_task < 2:
        return NOT_MET, f"a task has {ev.min_scored_per_task} scored attempt(s); variance needs at least 2 per task"
    lo, hi = ev.interval["ci95"]
    return MET, f"95% interval [{lo:.3f}, {hi:.3f}] ({ev.interval['method']})"


def _c3(ev):
    if ev.incomplete_attempts:
        return NOT_MET, f"{ev.incomplete_attempts} attempt(s) have no outcome yet (resume the run)"
    if ev.outcomes_disclosed is True:
        counts = ", ".join(f"{k} {v}" for k, v in (ev.outcome_counts or {}).items())
        return MET, "every attempt's outcome is published" + (f" ({counts})" if counts else "")
    if ev.outcomes_disclosed is False:
        return NOT_MET, "only some outcomes were published (no other runs disclosed)"
    return NOT_MET, "the outcomes of the other attempts are not disclosed"


# -- claims written down from someone else's post -----------------------------------------------

def evidence_from_claim(doc: dict, where: str = "claim") -> Evidence:
    """Map a CLAIM.yaml (see README: eval audit) onto Evidence, refusing what it cannot read."""
    if not isinstance(doc, dict):
        raise ArchprobeError(f"{where}: a claim is a mapping (YAML or JSON object)")
    if doc.get("schema") == "archprobe.eval-report/1":
        return evidence_from_report(doc)
    task = _section(doc, "task", where)
    execution = _section(doc, "execution", where)
    conclusion = _section(doc, "conclusion", where)
    env = task.get("environment") or {}
    init = task.get("initial_state") or {}
    interventions = execution.get("interventions")
    if isinstance(interventions, str) and interventions.lower() in ("unknown", "not recorded", "none recorded"):
        interventions = None
    outcomes = conclusion.get("outcomes_disclosed")
    variance = conclusion.get("variance")
    if variance is not None and not (isinstance(variance, dict) and len(variance.get("ci95") or []) == 2):
        raise ArchprobeError(f"{where}: conclusion.variance needs ci95: [low, high] and a method")
    return Evidence(
        task_hash=task.get("hash"), task_fixed=_tri(task.get("fixed")),
        isolated=_tri(env.get("isolated")), network_policy=env.get("network"),
        initial_state_reproducible=_tri(init.get("reproducible")), initial_state_detail=init.get("detail"),
        interventions=_int_or_none(interventions, f"{where}: execution.interventions"),
        attempts_total=_int_or_none(execution.get("attempts_total"), f"{where}: execution.attempts_total"),
        successes=_int_or_none(execution.get("successes"), f"{where}: execution.successes"),
        retries_counted=_tri(execution.get("retries_counted")),
        assisted_labelled=_tri(execution.get("human_help_labelled")),
        reruns=list(conclusion.get("reruns") or []),
        interval=({"ci95": list(variance["ci95"]), "method": str(variance.get("method", "stated"))}
                  if variance else None),
        min_scored_per_task=_int_or_none(conclusion.get("min_attempts_per_task"), f"{where}: min_attempts_per_task"),
        outcomes_disclosed=(True if isinstance(outcomes, dict) else _tri(outcomes)),
        outcome_counts=outcomes if isinstance(outcomes, dict) else None)


def evidence_from_report(doc: dict) -> Evidence:
    """An archprobe.eval-report/1 document audited as a claim: its own numbers, re-checked."""
    attempts = doc.get("attempts") or []
    per_task = doc.get("per_task") or []
    outcomes = doc.get("outcomes") or {}
    return Evidence(
        task_hash=doc.get("task_set_hash"), isolated=doc.get("isolation", {}).get("isolated"),
        network_policy=doc.get("isolation", {}).get("network"),
        initial_state_reproducible=doc.get("isolation", {}).get("initial_state_reproducible"),
        initial_state_detail=doc.get("isolation", {}).get("initial_state"),
        interventions=doc.get("interventions"), attempts_total=doc.get("attempts_total"),
        retries_counted=True if doc.get("attempts_total") == len(attempts) else False,
        assisted_labelled=doc.get("assisted_attempts") is not None, assisted_attempts=doc.get("assisted_attempts"),
        reruns=doc.get("independent_reruns") or [],
        interval={"ci95": doc["ci95"], "method": doc.get("ci_method", "stated")} if doc.get("ci95") else None,
        min_scored_per_task=min((t.get("scored", t.get("attempts", 0)) for t in per_task), default=None),
        outcomes_disclosed=len(attempts) == doc.get("attempts_total") and sum(outcomes.values()) == len(attempts),
        outcome_counts=outcomes)


def _section(doc, name, where):
    value = doc.get(name) or {}
    if not isinstance(value, dict):
        raise ArchprobeError(f"{where}: `{name}` must be a mapping")
    return value


def _tri(value) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("yes", "true"):
            return True
        if low in ("no", "false"):
            return False
    return None


def _int_or_none(value, where: str) -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("unknown", "undisclosed", "")):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ArchprobeError(f"{where} must be a non-negative integer or `unknown`, not {value!r}")
    return value
