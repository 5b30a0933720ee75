"""`archprobe eval` as a user meets it: real processes, a real stand-in server, one-line errors."""

from __future__ import annotations

import json

import pytest

from archprobe.eval.standin import Behaviour, StandinServer
from archprobe.eval.tasks import load_task_set
from tests.support.cli import run


@pytest.fixture(scope="module")
def server():
    with StandinServer(load_task_set("builtin"), Behaviour(seed=9, p_correct=0.7, p_error=0.05)) as srv:
        yield srv


def test_run_report_intervene_html(tmp_path, server):
    ledger = str(tmp_path / "l.sqlite")
    r = run("eval", "run", "builtin", "--endpoint", server.url, "--model", "standin-model", "--attempts", "2",
            "--ledger", ledger, "--run-id", "cli-run", "--backoff", "0.01", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "archprobe.eval-report/1" and doc["run_id"] == "cli-run"
    assert sum(doc["outcomes"].values()) == doc["attempts_total"] == len(doc["attempts"])
    assert set(doc["checks"]) == {"T1", "T2", "T3", "E1", "E2", "E3", "C1", "C2", "C3"}
    assert doc["served_models"] == ["standin-model"]
    attempt = doc["attempts"][0]["attempt_id"]
    r = run("eval", "intervene", "cli-run", "--attempt", attempt, "--kind", "fix", "--note", "typo",
            "--ledger", ledger)
    assert r.returncode == 0, r.stderr
    html = tmp_path / "r.html"
    r = run("eval", "report", "cli-run", "--ledger", ledger, "--html", str(html), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["interventions"] == 1 and doc["attempts"][0]["assisted"]
    page = html.read_text()
    assert "<svg" in page and attempt in page and "http" not in page.split("<body>")[0].replace(
        "http://www.w3.org", "")
    r = run("eval", "report", "cli-run", "--ledger", ledger, env={"COLUMNS": "160"})
    assert r.returncode == 0 and "verdict" in r.stdout
    r = run("eval", "runs", "--ledger", ledger, "--json")
    assert json.loads(r.stdout)["runs"][0]["run_id"] == "cli-run"


def test_audit_cli(tmp_path):
    from tests.support.eval_sets import EXAMPLE

    r = run("eval", "audit", str(EXAMPLE), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "methodological_lead"
    r = run("eval", "audit", str(EXAMPLE), env={"COLUMNS": "160"})
    assert "methodological_lead" in r.stdout and "E2" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["eval", "run", "/no/such/set", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m"], "no tasks.jsonl"),
    (["eval", "report", "r", "--ledger", "/no/such.sqlite"], "no ledger here"),
    (["eval", "audit", "/no/claim.yaml"], "no such claim file"),
    (["eval", "import-inspect", "/no/log.eval", "--ledger", "{tmp}/l.sqlite"], "no such log file"),
])
def test_user_mistakes_are_one_line(tmp_path, args, needle):
    r = run(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith("error: ") and needle in r.stderr and "Traceback" not in r.stderr


def test_bad_claim_and_unknown_run(tmp_path, server):
    bad = tmp_path / "claim.yaml"
    bad.write_text("execution:\n  attempts_total: lots\n")
    r = run("eval", "audit", str(bad))
    assert r.returncode == 2 and "attempts_total" in r.stderr
    bad.write_text("{: [")
    r = run("eval", "audit", str(bad))
    assert r.returncode == 2 and "not valid YAML" in r.stderr
    ledger = str(tmp_path / "l.sqlite")
    run("eval", "run", "builtin", "--endpoint", server.url, "--model", "standin-model", "--attempts", "1",
        "--ledger", ledger, "--run-id", "x", "--json")
    r = run("eval", "report", "nope", "--ledger", ledger)
    assert r.returncode == 2 and "no run 'nope'" in r.stderr and "recent runs: x" in r.stderr
    r = run("eval", "run", "builtin", "--endpoint", server.url, "--model", "m", "--executor", "slurm",
            "--ledger", ledger)
    assert r.returncode == 2 and "unknown executor" in r.stderr


def test_unreachable_endpoint_is_recorded_as_errors_not_failures(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    r = run("eval", "run", "builtin", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--attempts", "1",
            "--max-retries", "1", "--backoff", "0.01", "--ledger", ledger, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["outcomes"]["error"] == doc["attempts_total"] == 24 and doc["outcomes"]["fail"] == 0
    assert doc["success_rate"] is None and doc["retries"] == 12


def test_price_approve_and_a_broken_chain_from_the_cli(tmp_path):
    import subprocess
    import sys

    from tests.support.eval_sets import Agent, agentic_set
    from tests.support.scripted import ScriptedServer

    agentic_set(tmp_path / "set")
    ledger = str(tmp_path / "l.sqlite")
    with ScriptedServer(Agent()) as srv:
        r = subprocess.run([sys.executable, "-m", "archprobe.cli.main", "eval", "run", str(tmp_path / "set"),
                            "--endpoint", srv.url, "--model", "m", "--attempts", "1", "--ledger", ledger,
                            "--run-id", "a", "--price", "input=3/M,output=15/M", "--approve", "--json"],
                           input="y\n", capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert "the agent wants to run" in r.stderr and "approve? [y/N]" in r.stderr
    attempt = doc["attempts"][0]
    assert attempt["outcome"] == "pass" and attempt["turns"] == 5
    assert attempt["cost_usd"] == attempt["tokens_in"] * 3e-6 + attempt["tokens_out"] * 15e-6
    assert doc["interventions"] == 1 and doc["interventions_list"][0]["kind"] == "approval"
    assert doc["chain"]["ok"]
    import sqlite3

    db = sqlite3.connect(ledger)
    db.execute("DROP TRIGGER outcomes_no_update")
    db.execute("UPDATE outcomes SET cost_usd=0")
    db.commit()
    db.close()
    r = run("eval", "report", "a", "--ledger", ledger, env={"COLUMNS": "200"})
    assert r.returncode == 0 and "BROKEN" in r.stdout and "outcomes:a/fix/0/0" in r.stdout
    r = run("eval", "verify", ledger)
    assert r.returncode == 1 and "(edited)" in r.stdout
    r = run("eval", "run", "builtin", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--price", "in=3",
            "--ledger", ledger)
    assert r.returncode == 2 and r.stderr.startswith("error: --price")
