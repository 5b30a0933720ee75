"""Model-side and task-side text against the protocol and the clock (real CLI, child process): task ids
with non-ASCII, RTL or NUL characters never reach a request header raw (the attempts are scored, not
`error` blamed on the endpoint), and a task regex that backtracks on the model's answer is a scored
`fail` with the reason, within the attempt's time, not a hung run."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from tests.support.cli import assert_bounded, run_cli


class _Model(http.server.BaseHTTPRequestHandler):
    answer = "a" * 40 + "!"
    seen_keys: list = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Model.seen_keys.append(self.headers.get("X-Archprobe-Attempt"))
        body = json.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": self.answer}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def model():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    _Model.seen_keys = []
    yield f"http://127.0.0.1:{srv.server_port}/v1"
    srv.shutdown()


def run(tmp_path, endpoint, tasks: list[dict], *extra):
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return run_cli("eval", "run", str(folder), "--endpoint", endpoint, "--model", "m", "--attempts", "1",
                   "--max-retries", "0", "--ledger", str(tmp_path / "l.sqlite"), "--json", "--no-progress",
                   *extra)


def test_task_ids_that_are_not_header_text_are_scored(tmp_path, model):
    ids = ["caf\u00e9", "\u202eevil", "nul\u0000id", "cr\r\nX-Injected: 1", "x" * 5000, "100%"]
    r = run(tmp_path, model, [{"id": i, "prompt": "say a", "scorer": "contains", "target": "a"} for i in ids])
    assert_bounded(r, ok=True, wall_s=40)
    doc = json.loads(r.stdout)
    assert doc["outcomes"]["pass"] == len(ids), doc["outcomes"]
    assert all(k.isascii() and k.isprintable() and len(k) <= 600 for k in _Model.seen_keys), _Model.seen_keys


def test_a_backtracking_task_regex_is_a_scored_fail_within_the_attempt(tmp_path, model):
    # ^(a+)+$ hung re; the regex engine sees through it, not through ^(a|aa)+$ (2^40 ways to split)
    r = run(tmp_path, model, [{"id": "redos", "prompt": "say a", "scorer": "regex", "target": "^(a|aa)+$"},
                              {"id": "nested", "prompt": "say a", "scorer": "regex", "target": "^(a+)+$"},
                              {"id": "ok", "prompt": "say a", "scorer": "regex", "target": "^a+"}],
            "--timeout", "5")
    assert_bounded(r, ok=True, wall_s=30)
    doc = json.loads(r.stdout)
    by_task = {a["task_id"]: a for a in doc["attempts"]}
    assert by_task["redos"]["outcome"] == "fail" and "scorer" in by_task["redos"]["reason"], by_task["redos"]
    assert by_task["nested"]["outcome"] == "fail" and by_task["ok"]["outcome"] == "pass"
