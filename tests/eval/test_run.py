"""The harness against a deterministic, flaky OpenAI-compatible server on 127.0.0.1."""

from collections import Counter

import pytest

from archprobe.eval import stats
from archprobe.eval.report import build_report
from archprobe.eval.runner import RunOptions, run_eval
from tests.support.eval_sets import ACTION_TO_OUTCOME, server_actions

OPTS = dict(model="standin-model", attempts=3, concurrency=8, timeout_s=0.6, max_retries=2, backoff_s=0.01)


def test_outcomes_match_the_servers_own_log(builtin, ledger, flaky_server):
    run_id = run_eval(ledger, builtin, RunOptions(endpoint=flaky_server.url, **OPTS))
    actions = server_actions(flaky_server)
    rows = ledger.attempts(run_id)
    assert len(rows) == len(actions), "every request the server saw is an attempt row, and vice versa"
    for row in rows:
        key = f"{row.task_id}/{row.sample}/{row.try_}"
        assert row.outcome == ACTION_TO_OUTCOME[actions[key]], key
    kinds = Counter(actions.values())
    assert kinds["error"] + kinds["rate_limit"] > 0 and kinds["stall"] > 0, "the fixture must exercise failures"

    report = build_report(ledger, run_id)
    assert report["attempts_total"] == len(actions)
    assert report["outcomes"]["pass"] == kinds["correct"]
    assert report["outcomes"]["fail"] == kinds["wrong"]
    assert report["outcomes"]["error"] == kinds["error"] + kinds["rate_limit"]
    assert report["outcomes"]["timeout"] == kinds["stall"]


def test_retries_are_linked_attempts_and_errors_are_not_scored(builtin, ledger, flaky_server):
    run_id = run_eval(ledger, builtin, RunOptions(endpoint=flaky_server.url, **OPTS))
    rows = {r.attempt_id: r for r in ledger.attempts(run_id)}
    retries = [r for r in rows.values() if r.retry_of]
    assert retries
    for r in retries:
        prev = rows[r.retry_of]
        assert prev.outcome in ("error", "timeout") and (prev.task_id, prev.sample) == (r.task_id, r.sample)
        assert r.try_ == prev.try_ + 1
    report = build_report(ledger, run_id)
    assert report["retries"] == len(retries)
    # each slot ends in exactly one final outcome; only pass/fail finals are scored
    finals: dict = {}
    for r in rows.values():
        key = (r.task_id, r.sample)
        if key not in finals or r.try_ > finals[key].try_:
            finals[key] = r
    assert len(finals) == len(builtin.tasks) * OPTS["attempts"]
    scored = [f for f in finals.values() if f.outcome in ("pass", "fail")]
    passes = sum(f.outcome == "pass" for f in scored)
    assert report["success_rate"] == pytest.approx(passes / len(scored))
    per_task = [(t["passes"], t["scored"]) for t in report["per_task"]]
    assert sum(p for p, _ in per_task) == passes and sum(n for _, n in per_task) == len(scored)
    expected = stats.clustered(per_task)
    assert report["ci95"] == [pytest.approx(expected.low), pytest.approx(expected.high)]
    assert report["ci_method"].startswith("clustered")


def test_single_task_uses_wilson_for_known_counts(tmp_path, ledger):
    import json

    from archprobe.eval.standin import Behaviour, StandinServer
    from archprobe.eval.tasks import load_task_set

    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "tasks.jsonl").write_text(json.dumps({"id": "q", "prompt": "2+2?", "target": "4"}) + "\n")
    ts = load_task_set(tmp_path / "set")
    with StandinServer(ts, Behaviour(seed=11, p_correct=0.5)) as srv:
        run_id = run_eval(ledger, ts, RunOptions(endpoint=srv.url, **{**OPTS, "attempts": 20}))
        correct = sum(e["action"] == "correct" for e in srv.log)
    report = build_report(ledger, run_id)
    assert report["outcomes"]["pass"] == correct and report["attempts_total"] == 20
    w = stats.wilson(correct, 20)
    assert report["ci_method"] == "wilson"
    assert report["ci95"] == [pytest.approx(w.low), pytest.approx(w.high)]


def test_agentic_task_runs_in_a_verified_fresh_workspace(builtin, ledger):
    from archprobe.eval.standin import Behaviour, StandinServer
    from archprobe.eval.tasks import TaskSet

    agentic = TaskSet(builtin.root, [t for t in builtin.tasks if t.agentic], builtin.hash)
    with StandinServer(builtin, Behaviour(seed=3, p_correct=0.5)) as srv:
        run_id = run_eval(ledger, agentic, RunOptions(endpoint=srv.url, **{**OPTS, "attempts": 4,
                                                                           "timeout_s": 60}))
        actions = server_actions(srv)
    rows = ledger.attempts(run_id)
    assert len(rows) == 4
    for r in rows:
        assert r.outcome == ACTION_TO_OUTCOME[actions[f"{r.task_id}/{r.sample}/{r.try_}"]]
        assert r.detail["workspace_start_hash"] == agentic.tasks[0].repo_hash
        assert r.detail["test"]["network"]  # the applied policy is stated
    # the starting repository itself was never touched
    from archprobe.eval.workspace import tree_hash

    assert tree_hash(builtin.root / agentic.tasks[0].repo) == agentic.tasks[0].repo_hash
