"""Run a task set N times per task into the ledger; resume a run after any crash.

The plan is a grid of slots (task, sample). A slot is settled when its latest attempt ended in
pass or fail, or in error/timeout with the retry budget spent. Everything else is run: a slot with
no attempt, one whose attempt was started but never got an outcome (the process died: that attempt
is closed as `cancelled` and a linked retry follows), one whose error still has retries left.
Resuming is therefore the same loop as running, which is why it cannot duplicate or lose a slot.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from archprobe.errors import ArchprobeError
from archprobe.eval.attempt import AttemptResult, AttemptSpec, run_attempt
from archprobe.eval.client import make_http_client
from archprobe.eval.ledger import AttemptRow, Ledger, LedgerError
from archprobe.eval.lock import RunLock
from archprobe.eval.slot import Slot, load_slots
from archprobe.eval.tasks import TaskSet

__all__ = ["RunOptions", "Slot", "attempt_id", "load_slots", "new_run_id", "run_eval"]
INTERRUPTED = "interrupted: the process ended before this attempt's outcome was recorded"


@dataclass
class RunOptions:
    endpoint: str
    model: str
    attempts: int = 1
    concurrency: int = 8
    executor: str = "local"
    timeout_s: float = 120.0
    max_retries: int = 2
    backoff_s: float = 1.0
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = 0
    api_key_env: str = "OPENAI_API_KEY"
    isolate_network: bool = True
    max_turns: int = 30               # agent budget per attempt
    max_tokens_agent: int | None = None   # agent budget per attempt (prompt + completion)
    price: dict | None = None         # Price.to_dict(): dollars per token, stored with the run

    def sampling(self, sample: int) -> dict:
        out: dict = {}
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.seed is not None:
            out["seed"] = self.seed + sample   # pinned per sample: a resumed slot asks with the same seed (T3)
        return out


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def attempt_id(run_id: str, task_id: str, sample: int, try_: int) -> str:
    return f"{run_id}/{task_id}/{sample}/{try_}"


def run_eval(ledger: Ledger, task_set: TaskSet, opts: RunOptions, run_id: str | None = None,
             progress: Callable[[int, int], None] | None = None, hooks: dict | None = None) -> str:
    """Create (or resume) a run and drive every slot to a settled state. Returns the run id.

    hooks (local executor only): `approve(attempt_id, command) -> (bool, note)` awaitable, asked before
    each command an agent runs; interventions recorded by `eval intervene` reach the agent by themselves.
    """
    _executor(opts)  # an unknown executor is refused before anything is written
    run_id = run_id or new_run_id()
    with RunLock(ledger.path, run_id):
        _run_locked(ledger, task_set, opts, run_id, progress, hooks or {})
    return run_id


def _run_locked(ledger, task_set, opts, run_id, progress, hooks) -> None:
    if ledger.has_run(run_id):
        run = ledger.run(run_id)
        if run["task_set_hash"] != task_set.hash:
            raise ArchprobeError(f"run {run_id} was made on task set {run['task_set_hash']}, this one is "
                                 f"{task_set.hash}", hint="resume with the same task set, or start a new run id")
        if run["source"] != "archprobe":
            raise ArchprobeError(f"run {run_id} was imported from {run['source']}; it cannot be resumed")
        opts = _options_of(run, opts)
        ledger.event(run_id, "resumed", {"executor": opts.executor})
    else:
        params = {k: v for k, v in asdict(opts).items() if k not in ("endpoint", "model", "attempts")}
        params["sampling"] = opts.sampling(0)
        params["served_models"] = _served_models(opts)
        params["chat_template_hash"] = None   # not reported by an OpenAI-compatible endpoint
        ledger.create_run(run_id, source="archprobe", task_set_hash=task_set.hash, task_set_path=str(task_set.root),
                          model=opts.model, endpoint=opts.endpoint, attempts_per_task=opts.attempts, params=params,
                          tasks=[(t.id, asdict(t)) for t in task_set.tasks])
    asyncio.run(_drive(ledger, task_set, opts, run_id, progress, hooks))


def _options_of(run: dict, given: RunOptions) -> RunOptions:
    """A resume uses the run's recorded settings, so every attempt of a run asked the same way."""
    p = run["params"]
    keep = {k: p[k] for k in ("timeout_s", "max_retries", "backoff_s", "temperature", "max_tokens", "seed",
                              "api_key_env", "isolate_network", "max_turns", "max_tokens_agent", "price")
            if k in p}
    return RunOptions(endpoint=run["endpoint"], model=run["model"], attempts=run["attempts_per_task"],
                      concurrency=given.concurrency, executor=given.executor, **keep)


def _served_models(opts: RunOptions) -> list[str] | None:
    """What the endpoint says it serves (serving fidelity); best effort, never fatal."""
    try:
        from openai import OpenAI

        client = OpenAI(base_url=opts.endpoint, api_key="not-needed", max_retries=0, timeout=5)
        return [m.id for m in client.models.list()]
    except Exception:
        return None


async def _drive(ledger: Ledger, task_set: TaskSet, opts: RunOptions, run_id: str, progress, hooks: dict) -> None:
    slots = load_slots(ledger.attempts(run_id), [t.id for t in task_set.tasks], opts.attempts)
    for slot in slots:  # close what a dead process left open
        last = slot.chain[-1] if slot.chain else None
        if last is not None and last.outcome is None:
            ledger.record_outcome(last.attempt_id, "cancelled", detail={"reason": INTERRUPTED})
            slot.chain[-1] = replace(last, outcome="cancelled", detail={"reason": INTERRUPTED})
    todo = [s for s in slots if not s.settled(opts.max_retries)]
    done = len(slots) - len(todo)
    if progress:
        progress(done, len(slots))
    execute = _executor(opts)
    semaphore = asyncio.Semaphore(max(1, opts.concurrency))
    client = make_http_client(opts.concurrency) if opts.executor == "local" else None
    local_hooks = {}
    if opts.executor == "local":
        local_hooks = {"approve": hooks.get("approve"), "operator_messages": ledger.attempt_interventions}

    async def settle(slot: Slot) -> None:
        nonlocal done
        task = task_set.by_id[slot.task_id]
        while not slot.settled(opts.max_retries):
            prev = slot.chain[-1] if slot.chain else None
            try_ = prev.try_ + 1 if prev else 0
            if prev is not None and prev.outcome in ("error", "timeout"):
                wait = prev.detail.get("retry_after_s") or opts.backoff_s * 2 ** (slot.failures() - 1)
                await asyncio.sleep(min(wait, 30.0) * (0.5 + random.random() / 2))
            aid = attempt_id(run_id, task.id, slot.sample, try_)
            spec = AttemptSpec(aid, f"{task.id}/{slot.sample}/{try_}", asdict(task), opts.endpoint, opts.model,
                               opts.api_key_env, opts.sampling(slot.sample),
                               min(task.timeout_s or opts.timeout_s, opts.timeout_s),
                               str(task_set.root / task.repo) if task.repo else None, opts.isolate_network,
                               str(task_set.root / task.hidden_tests) if task.hidden_tests else None,
                               opts.max_turns, opts.max_tokens_agent, opts.price)
            async with semaphore:
                ledger.start_attempt(run_id, aid, task.id, slot.sample, try_, prev.attempt_id if prev else None,
                                     {"sampling": spec.sampling, "timeout_s": spec.timeout_s})
                try:
                    result = await execute(spec, client, local_hooks)
                except LedgerError:
                    raise
                except Exception as exc:  # a harness fault is an `error`, recorded, never a pass or fail
                    result = AttemptResult("error", 0.0, detail={"reason": f"harness: {type(exc).__name__}: "
                                                                           f"{str(exc)[:300]}", "fault": "harness"})
            detail = {**result.detail, "retryable": result.retryable}
            if result.retry_after_s is not None:
                detail["retry_after_s"] = result.retry_after_s
            ledger.record_outcome(aid, result.outcome, seconds=result.seconds, tokens_in=result.tokens_in,
                                  tokens_out=result.tokens_out, server_model=result.server_model,
                                  answer=result.answer, detail=detail, cost_usd=result.cost_usd, turns=result.turns,
                                  steps=result.steps, approvals=result.approvals)
            slot.chain.append(AttemptRow(aid, task.id, slot.sample, try_, prev.attempt_id if prev else None,
                                         result.outcome, result.seconds, result.tokens_in, result.tokens_out,
                                         result.server_model, result.answer, detail, result.cost_usd, result.turns))
        done += 1
        if progress:
            progress(done, len(slots))

    try:
        await asyncio.gather(*(settle(s) for s in todo))
    finally:
        if client is not None:
            await client.aclose()
    ledger.event(run_id, "drive_finished", {"slots": len(slots)})


def _executor(opts: RunOptions):
    if opts.executor == "local":
        return run_attempt
    if opts.executor == "ray":
        from archprobe.eval.ray_executor import ray_execute

        return ray_execute
    raise ArchprobeError(f"unknown executor {opts.executor!r}", hint="local or ray")
