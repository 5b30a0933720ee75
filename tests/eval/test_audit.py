"""The nine checks on a relayed claim, and on a run made by archprobe."""

import json

from archprobe.eval.audit import audit_claim, audit_file
from archprobe.eval.report import build_report
from archprobe.eval.runner import RunOptions, run_eval
from archprobe.eval.standin import Behaviour, StandinServer
from tests.support.eval_sets import EXAMPLE


def test_relayed_anecdote_is_a_methodological_lead():
    doc = audit_file(EXAMPLE)
    assert doc["schema"] == "archprobe.eval-audit/1"
    assert doc["verdict"] == "methodological_lead"
    status = {k: v["status"] for k, v in doc["checks"].items()}
    for check in ("E2", "C1", "C2", "C3"):
        assert status[check] == "not_met", (check, doc["checks"][check])
    assert status["E1"] == "unknown"
    assert "undisclosed number of attempts" in doc["checks"]["E2"]["evidence"]


def test_interventions_not_recorded_are_unknown_never_zero():
    doc = audit_claim({"execution": {"attempts_total": 10}})
    assert doc["checks"]["E1"]["status"] == "unknown"
    doc = audit_claim({"execution": {"attempts_total": 10, "interventions": 0}})
    assert doc["checks"]["E1"]["status"] == "met"


def test_fully_evidenced_claim_is_a_conclusion():
    doc = audit_claim({
        "task": {"hash": "sha256:abc", "environment": {"isolated": True, "network": "none"},
                 "initial_state": {"reproducible": True}},
        "execution": {"attempts_total": 50, "successes": 31, "interventions": 2, "human_help_labelled": True},
        "conclusion": {"reruns": [{"by": "lab B", "host": "b1", "task_hash": "sha256:abc"}],
                       "variance": {"ci95": [0.48, 0.74], "method": "wilson"}, "outcomes_disclosed": True}})
    assert doc["verdict"] == "capability_conclusion", doc["reasons"]
    # a re-run on a different task does not count
    doc = audit_claim({"task": {"hash": "sha256:abc"},
                       "conclusion": {"reruns": [{"by": "b", "task_hash": "sha256:other"}]}})
    assert doc["checks"]["C1"]["status"] == "not_met"


def test_archprobe_run_with_reruns_and_interventions_is_a_conclusion(builtin, ledger, monkeypatch, tmp_path):
    opts = dict(model="standin-model", attempts=5, concurrency=8, timeout_s=30, max_retries=2, backoff_s=0.01)
    with StandinServer(builtin, Behaviour(seed=5, p_correct=0.7, p_error=0.05)) as srv:
        first = run_eval(ledger, builtin, RunOptions(endpoint=srv.url, **opts), run_id="mine")
        report = build_report(ledger, first)
        assert report["verdict"] == "methodological_lead"
        assert [k for k, v in report["checks"].items() if v["status"] != "met"] == ["C1"]
        monkeypatch.setenv("ARCHPROBE_OPERATOR", "second-team")
        monkeypatch.setenv("ARCHPROBE_HOST", "other-host")
        run_eval(ledger, builtin, RunOptions(endpoint=srv.url, **opts), run_id="theirs")
    failed = next(a for a in ledger.attempts(first) if a.outcome == "fail")
    ledger.add_intervention(failed.attempt_id, "message", "pointed the model at the failing assertion")
    report = build_report(ledger, first)
    assert report["verdict"] == "capability_conclusion", {k: v for k, v in report["checks"].items()}
    assert report["interventions"] == 1 and report["assisted_attempts"] == 1
    assert report["outcomes"]["fail"] > 0 and len(report["attempts"]) == report["attempts_total"]
    assert report["independent_reruns"][0]["run_id"] == "theirs"
    assert "second-team@other-host" in report["checks"]["C1"]["evidence"]
    assert report["success_rate_assisted"]["scored"] == 1
    # the same report, handed to someone else as a claim, audits the same way
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    assert audit_file(path)["verdict"] == "capability_conclusion"


def test_a_rerun_by_the_same_operator_on_the_same_host_is_not_independent(builtin, ledger):
    opts = dict(model="standin-model", attempts=2, concurrency=8, timeout_s=30, max_retries=0, backoff_s=0.01)
    with StandinServer(builtin, Behaviour(seed=5, p_correct=0.7)) as srv:
        run_eval(ledger, builtin, RunOptions(endpoint=srv.url, **opts), run_id="a")
        run_eval(ledger, builtin, RunOptions(endpoint=srv.url, **opts), run_id="b")
    assert build_report(ledger, "a")["checks"]["C1"]["status"] == "not_met"
