"""A bounded chat-completions client that says whose fault each failure is.

Why not the `openai` SDK: it reads a response body whole and parses it without a depth guard, so a
hostile endpoint can exhaust memory (1 GB body) or raise inside the harness (JSON nested 100k deep),
and its timeouts are per read, so a server trickling one byte a second never times out. Here every
request has one wall-clock deadline, the body is read up to a byte cap, and the outcome is one of:

- `Reply`: HTTP 200 with a well-formed chat completion (content and/or tool calls, usage);
- `ModelFault`: HTTP 200 whose body is not a usable completion (too big, not JSON, too deep, wrong
  shape). What the model side sent is scored: the attempt is a `fail` with this reason;
- `EndpointFault`: no connection, an HTTP error status, or no complete answer before the deadline.
  These are `error` / `timeout`, counted and shown next to the rate, never a pass or a fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field

from archprobe.formats.limits import (
    MAX_CONTENT_CHARS,
    MAX_RESPONSE_BYTES,  # per response (formats/limits.py holds every cap)
)

ATTEMPT_HEADER = "X-Archprobe-Attempt"


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str           # raw JSON text, as the model sent it


@dataclass
class Reply:
    content: str
    tool_calls: list[ToolCall]
    tokens_in: int | None
    tokens_out: int | None
    server_model: str | None
    finish_reason: str | None
    seconds: float
    system_fingerprint: str | None = None


@dataclass
class ModelFault:
    """HTTP 200, but the body is not a usable completion: the model side's doing, scored as a fail."""

    reason: str
    seconds: float


@dataclass
class EndpointFault:
    """The endpoint did not answer usably: `error` (status, connection) or `timeout` (deadline)."""

    outcome: str              # error | timeout
    reason: str
    seconds: float
    retryable: bool = True
    retry_after_s: float | None = None
    status: int | None = None
    body: str | None = None
    detail: dict = field(default_factory=dict)


def make_http_client(concurrency: int = 8):
    """An async HTTP client: httpx2 where installed (the openai SDK's own transport, whose connection pool
    is about twice as fast under concurrency here), else httpx; the same API either way."""
    try:
        import httpx2 as httpx
    except ImportError:
        import httpx

    limits = httpx.Limits(max_connections=max(100, concurrency * 4), max_keepalive_connections=max(32, concurrency * 2))
    return httpx.AsyncClient(limits=limits, timeout=None, follow_redirects=False, trust_env=False)


def header_value(text: str) -> str:
    """Task-set text (an attempt key holds the task id) made safe for an HTTP header: printable ASCII
    without `%` goes as it is; anything else (non-ASCII, RTL marks, NUL, CR/LF) is percent-encoded, and
    a value over 512 characters is replaced by its sha256. A task id is never blamed on the server."""
    import hashlib
    from urllib.parse import quote

    if not (text.isascii() and text.isprintable() and "%" not in text):
        text = quote(text, safe="/#:._-~")
    if len(text) > 512:
        text = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return text


async def chat(http, endpoint: str, model: str, messages: list[dict], *, deadline_s: float, attempt_key: str,
               api_key_env: str = "OPENAI_API_KEY", sampling: dict | None = None, tools: list[dict] | None = None,
               max_bytes: int = MAX_RESPONSE_BYTES) -> Reply | ModelFault | EndpointFault:
    """One POST /chat/completions within `deadline_s` seconds of wall clock, whatever the server does."""
    start = time.perf_counter()
    body: dict = {"model": model, "messages": messages, **(sampling or {})}
    if tools:
        body["tools"] = tools
    headers = {ATTEMPT_HEADER: header_value(attempt_key), "Content-Type": "application/json",
               "Authorization": "Bearer " + (os.environ.get(api_key_env) or "not-needed")}
    url = endpoint.rstrip("/") + "/chat/completions"
    if deadline_s <= 0:
        return EndpointFault("timeout", "no time left for a request", 0.0)
    try:
        status, resp_headers, raw, over = await asyncio.wait_for(_post(http, url, body, headers, max_bytes),
                                                                 deadline_s)
    except (TimeoutError, asyncio.TimeoutError):
        return EndpointFault("timeout", f"no complete answer within {deadline_s:.3g} s", time.perf_counter() - start)
    except Exception as exc:   # httpx transport errors: the endpoint is unreachable or hung up
        return EndpointFault("error", f"connection failed: {type(exc).__name__}: {exc}"[:300],
                             time.perf_counter() - start)
    seconds = time.perf_counter() - start
    if status != 200:
        retryable = status in (408, 409, 429) or status >= 500
        return EndpointFault("error", f"HTTP {status}", seconds, retryable=retryable,
                             retry_after_s=_retry_after(resp_headers), status=status,
                             body=raw[:500].decode("utf-8", "replace"))
    if over:
        return ModelFault(f"response body larger than {max_bytes:,} bytes", seconds)
    return parse_completion(raw, seconds)


async def _post(http, url, body, headers, max_bytes) -> tuple[int, dict, bytes, bool]:
    buf, over = bytearray(), False          # one growing buffer: no list of chunks joined into a copy
    async with http.stream("POST", url, content=json.dumps(body).encode(), headers=headers) as resp:
        async for chunk in resp.aiter_raw():
            if len(buf) + len(chunk) > max_bytes:
                over = True
                break
            buf += chunk
        return resp.status_code, dict(resp.headers), _decode(buf, resp.headers, max_bytes), over


def _decode(raw: bytearray, headers, max_bytes: int) -> bytes | bytearray:
    """Undo gzip/deflate if the server used it, never past the byte cap (a zip bomb stays bounded)."""
    enc = (headers.get("content-encoding") or "").lower()
    if enc not in ("gzip", "deflate"):
        return raw
    import zlib

    d = zlib.decompressobj(16 + zlib.MAX_WBITS if enc == "gzip" else zlib.MAX_WBITS)
    try:
        return d.decompress(raw, max_bytes + 1)
    except zlib.error:
        return b""


def parse_completion(raw: bytes, seconds: float) -> Reply | ModelFault:
    """A chat completion from bytes the server sent, or the reason it is not one."""
    try:
        doc = json.loads(raw)
    except RecursionError:
        return ModelFault("response JSON nested too deep", seconds)
    except (ValueError, UnicodeDecodeError) as exc:
        return ModelFault(f"response is not JSON ({str(exc)[:80]})", seconds)
    if not isinstance(doc, dict):
        return ModelFault("response is not a JSON object", seconds)
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ModelFault("response has no choices", seconds)
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return ModelFault("response choice has no message", seconds)
    content = message.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str):
        return ModelFault(f"message content is {type(content).__name__}, not text", seconds)
    if len(content) > MAX_CONTENT_CHARS:
        return ModelFault(f"message content longer than {MAX_CONTENT_CHARS:,} characters", seconds)
    calls = []
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        return ModelFault("tool_calls is not a list", seconds)
    for n, c in enumerate(raw_calls[:64]):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            return ModelFault(f"tool call {n} has no function name", seconds)
        args = fn.get("arguments", "")
        args = args if isinstance(args, str) else json.dumps(args)
        calls.append(ToolCall(str(c.get("id") or f"call_{n}")[:200], fn["name"][:200], args))
    usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
    return Reply(content=content, tool_calls=calls, tokens_in=_count(usage.get("prompt_tokens")),
                 tokens_out=_count(usage.get("completion_tokens")),
                 server_model=str(doc["model"])[:200] if isinstance(doc.get("model"), str) else None,
                 finish_reason=str(choices[0].get("finish_reason"))[:50] if choices[0].get("finish_reason") else None,
                 seconds=seconds,
                 system_fingerprint=str(doc.get("system_fingerprint"))[:200] if doc.get("system_fingerprint") else None)


def _count(value) -> int | None:
    """A token count the server reported: a non-negative int below 2**53, else unknown."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 53:
        return None
    return value


def _retry_after(headers: dict) -> float | None:
    try:
        value = headers.get("retry-after")
        return min(max(float(value), 0.0), 60.0) if value else None
    except (TypeError, ValueError):
        return None
