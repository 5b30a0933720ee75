"""The Ray executor agrees with the local one; Inspect AI logs import with exact counts."""

import os

import pytest

from archprobe.eval.report import build_report
from archprobe.eval.runner import RunOptions, run_eval
from archprobe.eval.standin import Behaviour, StandinServer
from tests.support.eval_sets import ACTION_TO_OUTCOME, server_actions


def outcomes_by_key(ledger, run_id):
    return {f"{r.task_id}/{r.sample}/{r.try_}": r.outcome for r in ledger.attempts(run_id)}


def test_ray_executor_gives_the_local_outcomes(builtin, ledger):
    ray = pytest.importorskip("ray", reason="ray is an optional extra (make install adds it)")
    opts = dict(model="standin-model", attempts=2, concurrency=8, timeout_s=30, max_retries=2, backoff_s=0.01)
    behaviour = Behaviour(seed=21, p_correct=0.6, p_error=0.1, p_rate_limit=0.05)
    with StandinServer(builtin, behaviour) as srv:
        run_eval(ledger, builtin, RunOptions(endpoint=srv.url, executor="local", **opts), run_id="local")
        local_actions = server_actions(srv)
    with StandinServer(builtin, behaviour) as srv:
        try:
            run_eval(ledger, builtin, RunOptions(endpoint=srv.url, executor="ray", **opts), run_id="ray")
        finally:
            ray.shutdown()
        ray_actions = server_actions(srv)
    assert local_actions == ray_actions
    local, remote = outcomes_by_key(ledger, "local"), outcomes_by_key(ledger, "ray")
    assert local == remote
    assert all(remote[k] == ACTION_TO_OUTCOME[a] for k, a in ray_actions.items())
    a, b = build_report(ledger, "local"), build_report(ledger, "ray")
    assert a["outcomes"] == b["outcomes"] and a["success_rate"] == b["success_rate"]


def test_inspect_log_imports_with_exact_counts(builtin, ledger, tmp_path, monkeypatch):
    pytest.importorskip("inspect_ai", reason="inspect_ai is an optional extra (make install adds it)")
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    from archprobe.eval.inspect_import import import_inspect_log

    exact = [t for t in builtin.tasks if t.scorer == "exact"]
    with StandinServer(builtin, Behaviour(seed=4, p_correct=0.5)) as srv:
        monkeypatch.setenv("STANDIN_BASE_URL", srv.url)
        monkeypatch.setenv("STANDIN_API_KEY", "not-needed")
        task = Task(dataset=[Sample(input=t.prompt, target=str(t.target), id=t.id) for t in exact],
                    solver=[generate()], scorer=match(), epochs=3, name="builtin-exact")
        logs = inspect_eval(task, model="openai-api/standin/standin-model", log_dir=str(tmp_path / "logs"),
                            display="none")
        correct = sum(e["action"] == "correct" for e in srv.log)
    run_id = import_inspect_log(ledger, logs[0].location)
    assert import_inspect_log(ledger, logs[0].location) == run_id   # importing twice adds nothing
    report = build_report(ledger, run_id)
    assert report["source"] == "inspect_ai"
    assert report["attempts_total"] == 3 * len(exact)
    assert report["outcomes"]["pass"] == correct
    assert report["outcomes"]["fail"] == 3 * len(exact) - correct
    assert report["interventions"] is None and report["checks"]["E1"]["status"] == "unknown"
    assert report["verdict"] == "methodological_lead"
    assert os.path.exists(logs[0].location)
