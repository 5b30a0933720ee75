"""`archprobe eval ...`: run, resume, intervene, report, compare, audit, import Inspect logs, stand-in."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli.output import emit
from archprobe.cli.params import (
    DEFAULT_LEDGER,
    HtmlOpt,
    JsonOpt,
    LedgerOpt,
    NoProgressOpt,
    OutOpt,
    RunIdOpt,
    SeedOpt,
)
from archprobe.cli.progress import shard_progress

app = typer.Typer(help="Evaluations with the nine-check method; every attempt kept in a SQLite ledger.",
                  no_args_is_help=True)


@app.command("run")
def run(tasks: Annotated[str, typer.Argument(help="Task-set folder (with tasks.jsonl) or `builtin`.")],
        endpoint: Annotated[str, typer.Option(help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")],
        model: Annotated[str, typer.Option(help="Model name to ask the endpoint for.")],
        attempts: Annotated[int, typer.Option(min=1, help="Attempts per task.")] = 5,
        concurrency: Annotated[int, typer.Option(min=1, help="Attempts in flight at once.")] = 8,
        ledger: LedgerOpt = DEFAULT_LEDGER,
        run_id: RunIdOpt = None,
        executor: Annotated[str, typer.Option(help="local (asyncio) or ray (RAY_ADDRESS for a cluster).")] = "local",
        timeout: Annotated[float, typer.Option(help="Seconds per attempt (wall clock).")] = 120.0,
        max_retries: Annotated[int, typer.Option(min=0, help="New linked attempts after an error or timeout.")] = 2,
        backoff: Annotated[float, typer.Option(min=0, help="First retry delay in seconds (doubles).")] = 1.0,
        temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default: the server's).")] = None,
        max_tokens: Annotated[int | None, typer.Option(help="Completion token limit.")] = None,
        seed: SeedOpt = 0,
        api_key_env: Annotated[str, typer.Option(help="Environment variable holding the API key.")] = "OPENAI_API_KEY",
        no_network_isolation: Annotated[bool, typer.Option(help="Run agentic test commands with the host "
                                                                "network.")] = False,
        price: Annotated[str | None, typer.Option(help="Dollars per token: input=3/M,output=15/M, or a YAML "
                                                      "file (flat, or keyed by model name).")] = None,
        max_turns: Annotated[int, typer.Option(min=1, help="Agent turns per attempt.")] = 30,
        max_agent_tokens: Annotated[int | None, typer.Option(min=1, help="Agent tokens (prompt + completion) "
                                                                       "per attempt.")] = None,
        approve: Annotated[bool, typer.Option("--approve", help="Ask on the terminal before each command an "
                                                                "agent runs; every answer is an intervention.")]
        = False,
        json_out: JsonOpt = False, no_progress: NoProgressOpt = False) -> None:
    """Run every task N times; every attempt, retry and failure goes into the ledger.

    Example: archprobe eval run builtin --endpoint http://127.0.0.1:8000/v1 --model my-model --attempts 5
    """

    from archprobe.cli import options
    from archprobe.eval.ledger import Ledger
    from archprobe.eval.pricing import parse_price
    from archprobe.eval.report import build_report
    from archprobe.eval.runner import RunOptions, new_run_id, run_eval
    from archprobe.eval.tasks import load_task_set

    # numbers checked by type before any attempt runs (cli/options.py)
    options.finite(timeout, "--timeout", 0.001, 7 * 86400)
    options.finite(backoff, "--backoff", 0, 3600)
    options.finite(temperature, "--temperature", 0, 100)
    if attempts > 100_000 or concurrency > 10_000 or max_retries > 1000 or (max_tokens is not None and
                                                                             not 1 <= max_tokens <= 1 << 24):
        raise options.OptionError("--attempts (<= 100000), --concurrency (<= 10000), --max-retries (<= 1000) "
                                  "or --max-tokens (1 to 2^24) out of range")
    task_set = load_task_set(tasks)
    table = parse_price(price, model)
    opts = RunOptions(endpoint=endpoint, model=model, attempts=attempts, concurrency=concurrency,
                      executor=executor, timeout_s=timeout, max_retries=max_retries, backoff_s=backoff,
                      temperature=temperature, max_tokens=max_tokens, seed=seed, api_key_env=api_key_env,
                      isolate_network=not no_network_isolation, max_turns=max_turns,
                      max_tokens_agent=max_agent_tokens, price=table.to_dict() if table else None)
    hooks = {"approve": _terminal_approver()} if approve else {}
    book = Ledger(ledger)
    rid = run_id or new_run_id()
    try:
        with shard_progress(not no_progress and not json_out, "attempts") as progress:
            run_eval(book, task_set, opts, run_id=rid, progress=None if approve else progress, hooks=hooks)
    except KeyboardInterrupt:
        typer.echo(f"interrupted: every finished attempt is in {ledger}; resume with --run-id {rid}", err=True)
        raise typer.Exit(130) from None
    from archprobe.cli.render.eval import render_run

    emit(build_report(book, rid), json_out, lambda doc: render_run(doc, ledger))


@app.command("intervene")
def intervene(run_id: str, attempt: Annotated[str, typer.Option(help="Attempt id (see `eval report`).")],
              kind: Annotated[str, typer.Option(help="message, approval or fix.")],
              note: Annotated[str, typer.Option(help="What the human did.")],
              ledger: LedgerOpt = DEFAULT_LEDGER, json_out: JsonOpt = False) -> None:
    """Record human help on an attempt (E1, E3): the attempt is then reported as assisted."""

    from archprobe.errors import ArchprobeError
    from archprobe.eval.ledger import Ledger

    book = Ledger(ledger)
    book.run(run_id)
    if book.attempt_run(attempt) != run_id:
        raise ArchprobeError(f"attempt {attempt!r} belongs to another run")
    book.add_intervention(attempt, kind, note)
    from archprobe.cli.render.eval import render_intervention

    emit({"run_id": run_id, "attempt_id": attempt, "kind": kind, "recorded": True}, json_out, render_intervention)


@app.command("report")
def report(run_id: str, ledger: LedgerOpt = DEFAULT_LEDGER,
           html: HtmlOpt = None,
           ci: Annotated[str, typer.Option(help="auto, clustered, bootstrap or wilson.")] = "auto",
           also_ledger: Annotated[list[str] | None, typer.Option(help="Another ledger to search for independent "
                                                                     "re-runs on the same task hash (C1).")] = None,
           json_out: JsonOpt = False) -> None:
    """Outcomes, success rate with a 95% interval, the nine checks and the verdict, every attempt."""

    from archprobe.errors import ArchprobeError
    from archprobe.eval.ledger import Ledger
    from archprobe.eval.report import build_report, write_html

    if ci not in ("auto", "clustered", "bootstrap", "wilson"):
        raise ArchprobeError(f"unknown interval method {ci!r}", hint="auto, clustered, bootstrap or wilson")
    others = [Ledger.existing(p, read_only=True) for p in also_ledger or []]
    doc = build_report(_existing(ledger, read_only=True), run_id, ci=ci, other_ledgers=others)
    if html:
        write_html(doc, html)
    from archprobe.cli.render.eval import render_report

    emit(doc, json_out, lambda d: render_report(d, html=html))


@app.command("runs")
def runs(ledger: LedgerOpt = DEFAULT_LEDGER, json_out: JsonOpt = False) -> None:
    """The runs in a ledger."""

    from archprobe.cli.render.eval import render_runs

    emit({"schema": "archprobe.eval-runs/1", "runs": _existing(ledger, read_only=True).runs()}, json_out,
         render_runs)


@app.command("compare")
def compare(run_a: str, run_b: str, ledger: LedgerOpt = DEFAULT_LEDGER, json_out: JsonOpt = False) -> None:
    """Paired comparison of two runs on the same task hash: mean per-task difference (B - A), 95% CI."""

    from archprobe.cli.render.eval import render_compare
    from archprobe.eval.compare import compare_runs

    emit(compare_runs(_existing(ledger, read_only=True), run_a, run_b), json_out, render_compare)


@app.command("audit")
def audit(claim: Annotated[str, typer.Argument(help="CLAIM.yaml / .json, or an archprobe eval report JSON.")],
          json_out: JsonOpt = False) -> None:
    """Apply the nine checks to someone else's published result and print the verdict with reasons."""

    from archprobe.cli.render.eval import render_checks
    from archprobe.eval.audit import audit_file

    emit(audit_file(claim), json_out, lambda doc: render_checks(doc, title=doc.get("claim") or claim))


@app.command("import-inspect")
def import_inspect(log: Annotated[str, typer.Argument(help="An Inspect AI .eval (or .json) log.")],
                   ledger: LedgerOpt = DEFAULT_LEDGER, json_out: JsonOpt = False) -> None:
    """Import an Inspect AI log so it can be reported and audited like an archprobe run."""

    from archprobe.eval.inspect_import import check_log, import_inspect_log
    from archprobe.eval.ledger import Ledger

    check_log(log)   # before a ledger is made for it
    rid = import_inspect_log(Ledger(ledger), log, checked=True)
    from archprobe.cli.render.eval import render_imported

    emit({"run_id": rid, "ledger": ledger}, json_out, render_imported)


@app.command("standin")
def standin(tasks: Annotated[str, typer.Argument(help="Task set whose answers the stand-in knows.")] = "builtin",
            port: int = 8011, seed: SeedOpt = 0, p_correct: float = 0.7, p_error: float = 0.0,
            p_rate_limit: float = 0.0, p_stall: float = 0.0, stall_s: float = 5.0, delay_s: float = 0.0,
            json_out: JsonOpt = False) -> None:
    """Serve a deterministic OpenAI-compatible stand-in on 127.0.0.1 (NOT a model) to try the harness.

    --json prints its address as a JSON document on stdout once it listens (for a script to read).
    """

    import time

    from archprobe.eval.standin import Behaviour, StandinServer
    from archprobe.eval.tasks import load_task_set

    srv = StandinServer(load_task_set(tasks), Behaviour(seed=seed, p_correct=p_correct, p_error=p_error,
                                                        p_rate_limit=p_rate_limit, p_stall=p_stall,
                                                        stall_s=stall_s, delay_s=delay_s), port=port).start()
    typer.echo(f"stand-in (not a model: answers right with p={p_correct}) at {srv.url}; Ctrl-C stops it",
               err=True)
    emit({"schema": "archprobe.standin/1", "url": srv.url, "model": False, "p_correct": p_correct}, json_out)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()



@app.command("verify")
def verify(ledger: Annotated[str, typer.Argument(help="A ledger (.sqlite) or an exported run (.json).")],
           run_id: RunIdOpt = None,
           json_out: JsonOpt = False) -> None:
    """Check every run's hash chain; name each row that was edited, deleted or inserted by hand.

    Exit status 1 when any chain is broken. Example: archprobe eval verify archprobe-ledger.sqlite
    """

    from archprobe.cli.render.eval import render_verify

    doc = _verify(ledger, run_id)
    emit(doc, json_out, render_verify)
    if not doc["ok"]:
        raise typer.Exit(1)


@app.command("export")
def export(run_id: str, ledger: LedgerOpt = DEFAULT_LEDGER, output: OutOpt = None, json_out: JsonOpt = False
           ) -> None:
    """Write one run's rows with their hash chain (JSON), so a third party can run `eval verify` on it.

    Without -o (or with -o -) the chain itself is printed; with -o FILE, --json prints what was written.
    """

    from pathlib import Path

    from archprobe.cli.render.eval import render_exported
    from archprobe.formats.jsontext import dumps

    doc = _existing(ledger, read_only=True).export_run(run_id)
    if output in (None, "-"):
        emit(doc, as_json=True)
        return
    Path(output).write_text(dumps(doc, indent=1))
    emit({"schema": "archprobe.eval-export-written/1", "run_id": run_id, "written": output,
          "rows": len(doc["rows"]), "head": doc["head"]}, json_out, render_exported)


def _verify(path: str, run_id: str | None) -> dict:
    from pathlib import Path

    from archprobe.eval.ledger import LedgerError, verify_export
    from archprobe.formats import structured

    p = Path(path)
    if p.suffix == ".json" and p.exists():
        return verify_export(structured.load_json(path, "the exported run", LedgerError))
    return _existing(path, read_only=True).verify(run_id)


def _terminal_approver():
    """Ask the person at the terminal before each agent command (one question at a time)."""
    import asyncio

    lock = asyncio.Lock()

    async def approve(attempt_id: str, command: str) -> tuple[bool, str]:
        async with lock:
            def ask() -> str:
                typer.echo(f"[{attempt_id}] the agent wants to run:\n  {command[:2000]!r}", err=True)
                typer.echo("approve? [y/N] ", err=True, nl=False)
                import sys

                return sys.stdin.readline().strip().lower()

            answer = await asyncio.to_thread(ask)
        return answer in ("y", "yes"), "asked on the terminal"

    return approve


def _existing(path: str, read_only: bool = False):
    from archprobe.eval.ledger import Ledger

    return Ledger.existing(path, read_only=read_only)
