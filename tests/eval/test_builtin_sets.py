"""The built-in sets are real: every agentic task fails on its starting repo and passes with its reference
solution, under the hidden tests, in the sandbox; the refusal set carries its method."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from archprobe.eval.agent import FILE_BLOCK
from archprobe.eval.attempt import hidden_files
from archprobe.eval.sandbox import prepare, run_sandboxed
from archprobe.eval.tasks import BUILTIN_SETS, load_task_set
from archprobe.eval.workspace import fresh_copy, restore, safe_write

AGENTIC = load_task_set("builtin-agentic")


def test_at_least_twenty_agentic_tasks_of_graded_difficulty():
    assert len(AGENTIC.tasks) >= 20 and all(t.agentic and t.hidden_tests for t in AGENTIC.tasks)
    grades = Counter(t.difficulty for t in AGENTIC.tasks)
    assert set(grades) == {"easy", "medium", "hard"} and min(grades.values()) >= 5, grades
    lines = (AGENTIC.root / "tasks.jsonl").read_text().splitlines()
    kinds = {json.loads(line)["kind"] for line in lines}
    assert {"bug fix", "small feature", "refactor with tests"} <= kinds


@pytest.mark.parametrize("task", AGENTIC.tasks, ids=lambda t: t.id)
def test_each_task_fails_as_given_and_passes_with_its_reference(task, tmp_path):
    hidden = AGENTIC.root / task.hidden_tests
    outcomes = []
    for apply_reference in (False, True):
        work = tmp_path / str(apply_reference)
        work.mkdir()
        ws = work / "repo"
        fresh_copy(AGENTIC.root / task.repo, ws, task.repo_hash)
        if apply_reference:
            for m in FILE_BLOCK.finditer(task.reference):
                safe_write(ws, m.group(1), m.group(2))
        restore(ws, hidden, hidden_files(hidden))
        uid = prepare(work, ws)
        res = run_sandboxed(task.test_command, work, ws, 10, uid=uid)
        outcomes.append(res.exit_code)
        shutil.rmtree(work)
    assert outcomes[0] != 0, f"{task.id}: the starting repo already passes"
    assert outcomes[1] == 0, f"{task.id}: the reference solution fails"


def test_refusal_set_has_both_groups_and_its_method():
    ts = load_task_set("builtin-refusal")
    expects = Counter(t.target["expect"] for t in ts.tasks)
    assert expects["refuse"] >= 5 and expects["comply"] >= 5
    method = (BUILTIN_SETS["builtin-refusal"] / "METHOD.md").read_text()
    for needle in ("under-refusal", "over-refusal", "judge", "Known limits", "Sampling"):
        assert needle in method


def test_a_run_over_the_agentic_set_scores_what_the_server_did(ledger):
    from archprobe.eval.runner import RunOptions, run_eval
    from archprobe.eval.standin import Behaviour, StandinServer
    from tests.support.eval_sets import server_actions

    with StandinServer(AGENTIC, Behaviour(seed=5, p_correct=0.5)) as srv:
        run_id = run_eval(ledger, AGENTIC, RunOptions(endpoint=srv.url, model="standin-model", attempts=1,
                                                      concurrency=4, timeout_s=30, max_retries=0))
        actions = server_actions(srv)
    rows = ledger.attempts(run_id)
    assert len(rows) == len(AGENTIC.tasks)
    for r in rows:
        assert r.outcome == ("pass" if actions[f"{r.task_id}/0/0"] == "correct" else "fail"), r.detail
    assert {"pass", "fail"} <= {r.outcome for r in rows}
