"""The agent runner against a scripted tool-calling server: the ledger reproduces the server's turns, tool
calls, tokens and dollars exactly, its minutes are the wall clock's, and interventions reach the agent."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from archprobe.eval.ledger import Ledger
from archprobe.eval.pricing import parse_price
from archprobe.eval.report import build_report
from archprobe.eval.runner import RunOptions, run_eval
from archprobe.eval.tasks import load_task_set
from tests.support.eval_sets import Agent, agentic_set
from tests.support.scripted import ScriptedServer, completion

PRICE = parse_price("input=3/M,output=15/M")


def run_agents(tmp_path, ledger, agent, attempts=4, hooks=None, run_id="agents"):
    agentic_set(tmp_path / "set")
    ts = load_task_set(tmp_path / "set")
    with ScriptedServer(agent) as srv:
        opts = RunOptions(endpoint=srv.url, model="m", attempts=attempts, concurrency=4, timeout_s=60,
                          max_retries=0, max_turns=10, price=PRICE.to_dict())
        run_eval(ledger, ts, opts, run_id=run_id, hooks=hooks)
    return ts


def test_the_ledger_reproduces_the_servers_turns_tool_calls_tokens_and_cost(tmp_path, ledger):
    agent = Agent()
    run_agents(tmp_path, ledger, agent)
    rows = ledger.attempts("agents")
    assert len(rows) == 4
    for row in rows:
        base = f"{row.task_id}/{row.sample}/{row.try_}"
        sent = agent.sent[base]
        steps = ledger.steps(row.attempt_id)
        turns = [s for s in steps if s["kind"] == "turn"]
        assert row.turns == len(turns) == len(sent)
        assert row.tokens_in == sum(t["tokens"][0] for t in sent)
        assert row.tokens_out == sum(t["tokens"][1] for t in sent)
        assert [(s["tokens_in"], s["tokens_out"]) for s in turns] == [tuple(t["tokens"]) for t in sent]
        assert row.cost_usd == row.tokens_in * 3e-6 + row.tokens_out * 15e-6
        tools = [s for s in steps if s["kind"] == "tool"]
        assert [s["name"] for s in tools] == [c["name"] for t in sent for c in t["calls"]]
        assert [json.loads(s["arguments"]) if s["ok"] or s["name"] != "run" else s["arguments"] for s in tools] == [
            c["args"] if "args" in c else c["raw"] for t in sent for c in t["calls"]]
        assert row.detail["tool_calls"] == len(tools)
        escape = [s for s in tools if s["arguments"] and "etc/passwd" in s["arguments"]]
        assert escape and not escape[0]["ok"] and "leaves the workspace" in escape[0]["result"]
        # minutes: archprobe's own clock spans the server's first to last request, plus setup and tests (< 1 s)
        span = agent.times[base][-1] - agent.times[base][0]
        assert span <= row.seconds <= span + 1.0, (span, row.seconds)
        assert row.outcome == ("pass" if row.sample % 2 == 0 else "fail"), row.detail
    bad = [s for s in ledger.steps("agents/fix/1/0") if s["kind"] == "tool" and not s["ok"]]
    assert any("not JSON" in s["result"] for s in bad)
    report = build_report(ledger, "agents")
    assert report["cost_usd"] == pytest.approx(sum(r.cost_usd for r in rows), rel=1e-12)
    assert report["price"]["input_per_token"] == 3e-6
    assert report["minutes"] == pytest.approx(sum(r.seconds for r in rows) / 60)
    assert report["interventions"] == 0 and report["chain"]["ok"]


def test_an_intervention_during_the_run_reaches_the_agent_and_is_counted(tmp_path, ledger):
    agent = Agent(pause_at="fix/0/0#2")

    def operator():
        assert agent.paused.wait(60)
        other = Ledger(ledger.path)                 # another process would do the same: eval intervene
        other.add_intervention("during/fix/0/0", "message", "look at the sign in add()")
        other.close()
        agent.resume.set()

    helper = threading.Thread(target=operator)
    helper.start()
    run_agents(tmp_path, ledger, agent, attempts=1, run_id="during")
    helper.join()
    after = agent.seen_messages["fix/0/0#3"]
    assert any(m.get("role") == "user" and "[operator message] look at the sign" in str(m.get("content"))
               for m in after)
    steps = ledger.steps("during/fix/0/0")
    assert [s["note"] for s in steps if s["kind"] == "operator_message"] == ["look at the sign in add()"]
    report = build_report(ledger, "during")
    assert report["interventions"] == 1 and report["assisted_attempts"] == 1


def test_approve_mode_asks_before_each_command_and_records_every_answer(tmp_path, ledger):
    asked = []

    async def approve(attempt_id, command):
        asked.append(command)
        await asyncio.sleep(0)
        return ("echo" in command, "test operator")

    run_agents(tmp_path, ledger, Agent(), attempts=1, hooks={"approve": approve}, run_id="approve")
    assert asked == ["python3 test_calc.py; echo status=$?"]
    rows = ledger.interventions("approve")
    assert [(r["kind"], r["note"].split(":")[0]) for r in rows] == [("approval", "approved")]
    run_step = next(s for s in ledger.steps("approve/fix/0/0") if s.get("name") == "run")
    assert "status=1" in run_step["result"]
    asked.clear()

    async def refuse(attempt_id, command):
        asked.append(command)
        return (False, "no")

    run_agents(tmp_path / "b", ledger, Agent(), attempts=1, hooks={"approve": refuse}, run_id="refused")
    run_step = next(s for s in ledger.steps("refused/fix/0/0") if s.get("name") == "run")
    assert not run_step["ok"] and "did not approve" in run_step["result"]
    assert build_report(ledger, "refused")["assisted_attempts"] == 1


def test_turn_and_token_budgets_end_the_loop(tmp_path, ledger):
    agentic_set(tmp_path / "set")
    ts = load_task_set(tmp_path / "set")

    def forever(key, body, entry):
        return 200, completion(tool_calls=[{"name": "list_files", "args": {}}], tokens=(50, 10)), {}

    with ScriptedServer(forever) as srv:
        run_eval(ledger, ts, RunOptions(endpoint=srv.url, model="m", attempts=1, timeout_s=30, max_retries=0,
                                        max_turns=4), run_id="turns")
        run_eval(ledger, ts, RunOptions(endpoint=srv.url, model="m", attempts=1, timeout_s=30, max_retries=0,
                                        max_turns=50, max_tokens_agent=130), run_id="tokens")
    turns, tokens = ledger.attempts("turns")[0], ledger.attempts("tokens")[0]
    assert turns.turns == 4 and turns.detail["agent_end"] == "turns" and turns.outcome == "fail"
    assert tokens.turns == 3 and tokens.detail["agent_end"] == "tokens" and tokens.cost_usd is None


@pytest.mark.parametrize("spec,pin,pout", [("input=3/M,output=15/M", 3e-6, 15e-6), ("input=0.5/K,output=2e-6", 5e-4,
                                                                                      2e-6)])
def test_price_tables(tmp_path, spec, pin, pout):
    p = parse_price(spec)
    assert (p.input, p.output) == (pytest.approx(pin), pytest.approx(pout))
    (tmp_path / "p.yaml").write_text("m1:\n  input: 1/M\n  output: 2/M\n")
    assert parse_price(str(tmp_path / "p.yaml"), "m1").output == pytest.approx(2e-6)
    from archprobe.errors import ArchprobeError

    for bad in ("input=3/G,output=1/M", "input=-1,output=1", "input=3/M"):
        with pytest.raises(ArchprobeError):
            parse_price(bad)
    with pytest.raises(ArchprobeError, match="no prices for model"):
        parse_price(str(tmp_path / "p.yaml"), "m2")
