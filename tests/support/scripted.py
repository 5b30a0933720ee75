"""A scripted OpenAI-compatible server on 127.0.0.1 for the eval tests: a function decides each answer.

`respond(key, body, turn)` returns (status, bytes or an iterator of bytes, extra headers); every
request is logged with its attempt key, so a test can compare the ledger with what the server did.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from archprobe.eval.client import ATTEMPT_HEADER


def completion(content: str = "", tool_calls: list[dict] | None = None, tokens: tuple[int, int] = (10, 5),
               model: str = "scripted") -> bytes:
    message: dict = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"id": f"call_{n}", "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}}
                                 for n, (name, args) in enumerate((c["name"], c["args"]) for c in tool_calls)]
    return json.dumps({"id": "x", "object": "chat.completion", "model": model, "choices": [
        {"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop", "message": message}],
        "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1],
                  "total_tokens": sum(tokens)}}).encode()


class ScriptedServer:
    def __init__(self, respond):
        self.respond = respond
        self.log: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                body = json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                key = self.headers.get(ATTEMPT_HEADER) or "?"
                with outer.lock:
                    entry = {"attempt": key, "at": time.time(), "messages": len(body.get("messages") or []),
                             "tools": bool(body.get("tools"))}
                    outer.log.append(entry)
                status, payload, headers = outer.respond(key, body, entry)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    if isinstance(payload, bytes):
                        self.send_header("Content-Length", str(len(payload)))
                        self.end_headers()
                        self.wfile.write(payload)
                    else:                              # a stream: no length, the connection closes after
                        self.send_header("Connection", "close")
                        self.end_headers()
                        for chunk in payload:
                            self.wfile.write(chunk)
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
