"""The multi-turn agent: a model edits a repository through the OpenAI tools API, inside the sandbox.

Why archprobe drives the loop itself: "the only success, X minutes, Y dollars" is only checkable when
the harness counts the turns, the tool calls, the tokens, the human interventions and the wall clock
itself. Tools: list_files, read_file, write_file, run (a shell command in the sandbox), run_tests (the
visible test command) and finish. A model that answers without tool calls is a single-reply agent:
its `FILE: path` blocks are applied and the loop ends, so plain chat endpoints work too.

Every turn and tool call becomes a step the runner writes to the ledger. The budget is turns and
tokens; what the model's malformed calls cause is told to the model (as a real agent sees errors)
and counted, never raised into the harness.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from archprobe.eval import client as chat_client
from archprobe.eval.sandbox import run_sandboxed
from archprobe.eval.workspace import EditError, clean_relpath, listing, safe_read, safe_write
from archprobe.formats.limits import MAX_RESULT_CHARS, MAX_TOOL_ARGS

FILE_BLOCK = re.compile(r"^FILE:[ \t]*([^\n]*?)[ \t]*\n```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
COMMAND_TIMEOUT_S = 120.0


def _fn(name: str, description: str, props: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props, "required": required}}}


TOOLS = [
    _fn("list_files", "List the repository's files.", {}, []),
    _fn("read_file", "Read one file of the repository.", {"path": {"type": "string"}}, ["path"]),
    _fn("write_file", "Write (create or replace) one file.", {"path": {"type": "string"},
                                                               "content": {"type": "string"}}, ["path", "content"]),
    _fn("run", "Run a shell command in the repository (no network).", {"command": {"type": "string"}}, ["command"]),
    _fn("run_tests", "Run the task's visible test command.", {}, []),
    _fn("finish", "Say you are done; the hidden tests then decide.", {"summary": {"type": "string"}}, []),
]
TOOL_NAMES = {t["function"]["name"] for t in TOOLS}


@dataclass
class Budget:
    max_turns: int = 30
    max_tokens: int | None = None      # prompt + completion tokens over the whole attempt


@dataclass
class AgentEnv:
    """What the loop needs from the attempt: where to work, how to run, whom to ask."""

    http: object
    endpoint: str
    model: str
    api_key_env: str
    sampling: dict
    attempt_key: str
    attempt_id: str
    attempt_dir: Path
    workspace: Path
    uid: int | None
    deadline: float                    # time.perf_counter() value
    visible_tests: Callable[[], dict]  # runs the visible test command, returns its summary
    approve: Callable[[str, str], Awaitable[tuple[bool, str]]] | None = None   # (attempt_id, command)
    operator_messages: Callable[[str], list[dict]] | None = None               # new interventions


@dataclass
class AgentRun:
    end: str                           # finished | replied | turns | tokens | deadline | endpoint | model
    turns: int = 0
    tokens_in: int | None = 0
    tokens_out: int | None = 0
    steps: list[dict] = field(default_factory=list)
    approvals: list[dict] = field(default_factory=list)
    tool_errors: int = 0
    edits_refused: list[str] = field(default_factory=list)
    fault: object = None               # the EndpointFault or ModelFault that ended the loop, if any
    last_answer: str = ""
    server_model: str | None = None
    waiting_on_endpoint: bool = False  # True when the deadline passed during a request


def first_message(task_messages: list[dict], workspace: Path, instructions: str) -> list[dict]:
    messages = [dict(m) for m in task_messages]
    from archprobe.eval.workspace import repo_text

    messages[-1]["content"] = str(messages[-1].get("content", "")) + instructions + repo_text(workspace)
    return messages


async def run_agent(env: AgentEnv, messages: list[dict], budget: Budget) -> AgentRun:
    run = AgentRun(end="turns")
    seen_interventions = 0
    while run.turns < budget.max_turns:
        for note in (env.operator_messages(env.attempt_id) if env.operator_messages else [])[seen_interventions:]:
            seen_interventions += 1
            messages.append({"role": "user", "content": f"[operator {note['kind']}] {note['note']}"})
            run.steps.append({"kind": "operator_message", "turn": run.turns, "intervention": note["kind"],
                              "note": note["note"][:2000]})
        remaining = env.deadline - time.perf_counter()
        if remaining <= 0:
            run.end = "deadline"
            return run
        key = env.attempt_key + (f"#{run.turns}" if run.turns else "")
        reply = await chat_client.chat(env.http, env.endpoint, env.model, messages, deadline_s=remaining,
                                       attempt_key=key, api_key_env=env.api_key_env, sampling=env.sampling,
                                       tools=TOOLS)
        if not isinstance(reply, chat_client.Reply):
            run.fault = reply
            run.end = "endpoint" if isinstance(reply, chat_client.EndpointFault) else "model"
            run.waiting_on_endpoint = getattr(reply, "outcome", None) == "timeout"
            return run
        run.turns += 1
        run.server_model = reply.server_model or run.server_model
        run.tokens_in = _add(run.tokens_in, reply.tokens_in)
        run.tokens_out = _add(run.tokens_out, reply.tokens_out)
        run.last_answer = reply.content
        run.steps.append({"kind": "turn", "turn": run.turns, "tokens_in": reply.tokens_in,
                          "tokens_out": reply.tokens_out, "seconds": round(reply.seconds, 4),
                          "finish_reason": reply.finish_reason, "content": reply.content[:4000],
                          "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments[:4000]}
                                         for c in reply.tool_calls]})
        if not reply.tool_calls:
            run.end = "replied"
            _apply_file_blocks(env.workspace, reply.content, run)
            return run
        messages.append({"role": "assistant", "content": reply.content or None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls]})
        finished = False
        for call in reply.tool_calls:
            started = time.perf_counter()
            result, ok = await _call_tool(env, call, run)
            run.steps.append({"kind": "tool", "turn": run.turns, "id": call.id, "name": call.name,
                              "arguments": call.arguments[:4000], "ok": ok, "result": result[:4000],
                              "seconds": round(time.perf_counter() - started, 4)})
            run.tool_errors += not ok
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result[:MAX_RESULT_CHARS]})
            finished = finished or (call.name == "finish" and ok)
        if finished:
            run.end = "finished"
            return run
        if budget.max_tokens is not None and (run.tokens_in or 0) + (run.tokens_out or 0) >= budget.max_tokens:
            run.end = "tokens"
            return run
    return run


def _add(total: int | None, n: int | None) -> int | None:
    return None if total is None or n is None else total + n


def _apply_file_blocks(workspace: Path, content: str, run: AgentRun) -> None:
    """A single reply's `FILE: path` blocks; a malformed one is recorded and ends the attempt as a fail."""
    for m in FILE_BLOCK.finditer(content):
        try:
            safe_write(workspace, m.group(1), m.group(2))
        except EditError as exc:
            run.edits_refused.append(f"{m.group(1)[:80]!r}: {exc}")


async def _call_tool(env: AgentEnv, call, run: AgentRun) -> tuple[str, bool]:
    if call.name not in TOOL_NAMES:
        return f"error: unknown tool {call.name[:80]!r}; tools: {', '.join(sorted(TOOL_NAMES))}", False
    if len(call.arguments) > MAX_TOOL_ARGS:
        return f"error: arguments longer than {MAX_TOOL_ARGS:,} characters", False
    try:
        args = json.loads(call.arguments or "{}")
    except RecursionError:
        return "error: arguments nested too deep", False
    except ValueError as exc:
        return f"error: arguments are not JSON ({str(exc)[:80]})", False
    if not isinstance(args, dict):
        return "error: arguments must be a JSON object", False
    try:
        if call.name == "list_files":
            return "\n".join(listing(env.workspace)) or "(empty)", True
        if call.name == "read_file":
            return safe_read(env.workspace, args.get("path")), True
        if call.name == "write_file":
            content = args.get("content")
            if not isinstance(content, str):
                return "error: content must be a string", False
            written = safe_write(env.workspace, args.get("path"), content)
            _own(env, written)
            return f"wrote {written} ({len(content.encode()):,} bytes)", True
        if call.name == "run":
            command = args.get("command")
            if not isinstance(command, str) or not command.strip() or "\0" in command:
                return "error: command must be a non-empty string", False
            if env.approve is not None:
                ok, note = await env.approve(env.attempt_id, command)
                run.approvals.append({"command": command[:2000], "approved": ok, "note": note})
                if not ok:
                    return "the operator did not approve this command; it was not run", False
            remaining = env.deadline - time.perf_counter()
            if remaining <= 0:
                return "error: the attempt's deadline has passed", False
            res = await asyncio.to_thread(run_sandboxed, command, env.attempt_dir, env.workspace,
                                          min(remaining, COMMAND_TIMEOUT_S), uid=env.uid)
            return _command_text(res.summary()), True
        if call.name == "run_tests":
            return _command_text(await asyncio.to_thread(env.visible_tests)), True
        return "finished", True
    except EditError as exc:
        return f"error: {exc}", False


def _own(env: AgentEnv, rel: str) -> None:
    """Files the harness writes belong to the sandbox uid, so the model's commands can change them."""
    import os

    if env.uid is None:
        return
    parts = clean_relpath(rel)
    here = env.workspace
    for p in parts:
        here = here / p
        os.chown(here, env.uid, env.uid, follow_symlinks=False)


def _command_text(summary: dict) -> str:
    status = "killed at the time limit" if summary["timed_out"] else f"exit code {summary['exit_code']}"
    extra = f"\n[{summary['truncated_bytes']:,} more bytes of output dropped]" if summary["truncated_bytes"] else ""
    return f"{status}\n{summary['output_tail']}{extra}"
