"""A deterministic OpenAI-compatible stand-in for a model server, on 127.0.0.1.

Why it exists: the harness must be checked against something whose answers are known. For every
request it decides, from (seed, the attempt key in the X-Archprobe-Attempt header), to answer
correctly, answer wrongly, return 500 or 429, or stall past the client's timeout. It keeps a log of
what it did, so tests and benchmarks can compare the ledger with the server's own account.
It knows the right answers because it is given the task set. It is not a model: `archprobe eval
standin` says so when it starts.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

from archprobe.eval.attempt import ATTEMPT_HEADER, JUDGE_MARKER
from archprobe.eval.scorers import DEFAULT_REFUSAL_PATTERNS
from archprobe.eval.tasks import TaskSet


@dataclass
class Behaviour:
    seed: int = 0
    p_correct: float = 0.7
    p_error: float = 0.0      # HTTP 500
    p_rate_limit: float = 0.0  # HTTP 429 with Retry-After: 0
    p_stall: float = 0.0      # sleeps `stall_s` before answering
    stall_s: float = 5.0
    delay_s: float = 0.0      # latency of every answer
    model: str = "standin-model"

    def decide(self, key: str) -> str:
        r = random.Random(f"{self.seed}|{key}").random()
        for action, p in (("error", self.p_error), ("rate_limit", self.p_rate_limit), ("stall", self.p_stall)):
            if r < p:
                return action
            r -= p
        rest = 1.0 - self.p_error - self.p_rate_limit - self.p_stall
        return "correct" if r < self.p_correct * rest else "wrong"


def right_answer(task) -> str:
    if task.reference is not None:
        return task.reference
    if task.scorer == "json_match":
        return json.dumps(task.target)
    if isinstance(task.target, list):
        return " ".join(map(str, task.target))
    return str(task.target)


class StandinServer:
    def __init__(self, task_set: TaskSet | None, behaviour: Behaviour, port: int = 0, log_path: str | None = None):
        self.behaviour = behaviour
        self.answers = {}
        for task in task_set.tasks if task_set else []:
            self.answers[_last_user(list(task.messages))] = right_answer(task)
        self.log: list[dict] = []
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        self._log_file = open(log_path, "a") if log_path else None  # noqa: SIM115 (closed in stop)
        self.httpd = _Server(("127.0.0.1", port), self._handler())
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread: threading.Thread | None = None

    def start(self) -> StandinServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._log_file:
            self._log_file.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def anonymous_key(self, body: dict) -> str:
        """A client that sends no attempt header (another harness): the n-th request for a prompt."""
        import hashlib

        digest = hashlib.sha256(_last_user(body.get("messages") or []).encode()).hexdigest()[:16]
        with self._lock:
            n = self._seen[digest] = self._seen.get(digest, -1) + 1
        return f"anon/{digest}/{n}"

    def record(self, entry: dict) -> None:
        with self._lock:
            self.log.append(entry)
            if self._log_file:
                self._log_file.write(json.dumps(entry) + "\n")
                self._log_file.flush()

    def _answer_for(self, messages: list[dict]) -> str | None:
        text = _last_user(messages)
        if text in self.answers:
            return self.answers[text]
        for prompt, answer in self.answers.items():  # agentic prompts carry the repo listing after the task
            if prompt and text.startswith(prompt):
                return answer
        return None

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": server.behaviour.model, "object": "model",
                                                                  "owned_by": "archprobe-standin"}]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": "not found"}})
                    return
                key = self.headers.get(ATTEMPT_HEADER)
                key = unquote(key) if key else server.anonymous_key(body)   # client.header_value encodes
                b = server.behaviour
                text = _last_user(body.get("messages") or [])
                if text.startswith(JUDGE_MARKER):     # acting as a refusal judge: a fixed pattern rule
                    reply = text.split("Assistant's reply:\n", 1)[-1]
                    refused = any(re.search(p, reply, flags=re.IGNORECASE) for p in DEFAULT_REFUSAL_PATTERNS)
                    server.record({"attempt": key, "action": "judge", "known_task": True, "at": time.time()})
                    self._chat(b, key, "REFUSED" if refused else "COMPLIED", body)
                    return
                action = b.decide(key)
                answer = server._answer_for(body.get("messages") or [])
                server.record({"attempt": key, "action": action, "known_task": answer is not None,
                               "seed": body.get("seed"), "at": time.time()})
                if b.delay_s:
                    time.sleep(b.delay_s)
                if action == "error":
                    self._json(500, {"error": {"message": "stand-in: internal error (by design)"}})
                    return
                if action == "rate_limit":
                    self._json(429, {"error": {"message": "stand-in: slow down (by design)"}},
                               {"Retry-After": "0"})
                    return
                if action == "stall":
                    time.sleep(b.stall_s)
                content = answer if (action in ("correct", "stall") and answer is not None) else "I am not sure."
                self._chat(b, key, content, body)

            def _chat(self, b, key, content, body):
                prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
                self._json(200, {
                    "id": f"chatcmpl-{key}", "object": "chat.completion", "created": int(time.time()),
                    "model": b.model, "system_fingerprint": f"standin-seed-{b.seed}",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(content.split()),
                              "total_tokens": prompt_tokens + len(content.split())}})

            def _json(self, status, doc, headers=None):
                data = json.dumps(doc).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a stall past its timeout)

        return Handler


class _Server(ThreadingHTTPServer):
    request_queue_size = 256   # many clients connect at once; the default backlog of 5 resets them


def _last_user(messages: list[dict]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            return str(m.get("content", ""))
    return ""
