"""One guarded HTTP reader for every byte archprobe fetches (hub listing, headers, config, index,
shard downloads, model info, /metrics).

Servers are hostile input. Every request here is bounded:
- bytes: each response has a cap chosen by the caller (formats/limits.py); the body is streamed in
  chunks (`read1`) and the read stops at the cap; a Content-Length over the cap is refused unread;
- time: one deadline per command (`Deadline`) and one per request, both covering connect, headers
  and body together (a watchdog shuts the socket down when time is up, so a server dripping one
  byte every few seconds cannot stretch a per-read timeout without end);
- Range: a 206 must start where asked and may not carry more than asked; a server that ignores
  Range (200) is read only up to the last byte wanted, then the connection is dropped;
- redirects: at most MAX_REDIRECTS, http(s) only, credentials dropped when the host changes;
- requests: at most MAX_REQUESTS per command.
Built on `http.client` (standard library) because it lets us own every socket read.

Proxies are read from the environment as httpx and requests read them: HTTPS_PROXY / HTTP_PROXY /
ALL_PROXY (either case, the lower-case one first) name an `http://[user:password@]host:port` proxy,
used with CONNECT for https URLs and with absolute-URL requests for http ones; NO_PROXY lists hosts
(`*`, `example.com` also matching its sub-domains, `host:port`) reached directly. SOCKS and https://
proxies are refused with one line. Certificates: https is verified against the system's trust store
(`ssl.create_default_context()`); SSL_CERT_FILE / SSL_CERT_DIR point it at another bundle (a company
CA, a test CA), as OpenSSL reads them; there is no switch that turns verification off.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from urllib.parse import urljoin, urlsplit

from archprobe.errors import SourceError
from archprobe.formats.limits import MAX_ERROR_BODY_BYTES as ERROR_BODY_BYTES
from archprobe.formats.limits import Deadline, cap

CHUNK = 64 * 1024
IDLE_TIMEOUT_S = 30.0          # one socket read without a byte
REDIRECTS = (301, 302, 303, 307, 308)


class Response:
    """Status, headers (lower-case names) and the body bytes that were kept."""

    __slots__ = ("status", "headers", "body", "url")

    def __init__(self, status: int, headers: dict[str, str], body: bytes, url: str):
        self.status, self.headers, self.body, self.url = status, headers, body, url


class GuardedHTTP:
    """The HTTP reads of one command (thread-safe: one kept-alive connection per thread and host)."""

    def __init__(self, deadline: Deadline | None = None, headers: dict[str, str] | None = None):
        self.deadline = deadline or Deadline()
        self.headers = dict(headers or {})
        self.requests = 0
        self.bytes_read = 0
        self.max_requests = cap("MAX_REQUESTS")
        self.request_deadline_s = float(cap("REQUEST_DEADLINE_S"))
        self._lock = threading.Lock()
        self._local = threading.local()

    def get(self, url: str, limit: int, byte_range: tuple[int, int] | None = None, sink=None) -> Response:
        """GET `url` following redirects. 2xx bodies are kept up to `limit` bytes (more is an error), or
        written to `sink(bytes)` when given; `byte_range=(first, last)` asks for those bytes only."""
        _check_url(url)
        headers = dict(self.headers)
        if byte_range is not None:
            headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        origin = _origin(url)
        for _ in range(cap("MAX_REDIRECTS") + 1):
            resp = self._one(url, headers, limit, byte_range, sink)
            if resp.status not in REDIRECTS:
                return resp
            location = resp.headers.get("location")
            if not location:
                raise SourceError(f"{shown_url(url)}: HTTP {resp.status} redirect without a Location")
            url = urljoin(url, location)
            if not url.lower().startswith(("http://", "https://")):
                raise SourceError(f"{shown_url(url)}: redirected to a non-HTTP URL; refused")
            _check_url(url)
            if _origin(url) != origin:   # never hand the token to another host
                headers.pop("Authorization", None)
                headers.pop("authorization", None)
        raise SourceError(f"{shown_url(url)}: more than {cap('MAX_REDIRECTS')} redirects; refused")

    def _one(self, url: str, headers: dict, limit: int, byte_range, sink) -> Response:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SourceError(f"{shown_url(url)}: not an http(s) URL")
        with self._lock:
            self.requests += 1
            if self.requests > self.max_requests:
                raise SourceError(f"{shown_url(url)}: over {self.max_requests:,} HTTP requests in one command; "
                                  "refused", hint="raise ARCHPROBE_MAX_REQUESTS if the repo is that large")
        left = min(self.deadline.check(shown_url(url)), self.request_deadline_s)
        conn = self._connection(parts)
        fired = threading.Event()
        watchdog = threading.Timer(left, _shutdown, (conn, fired))
        watchdog.daemon = True
        watchdog.start()
        end = time.monotonic() + left
        keep = False
        try:
            conn.timeout = min(IDLE_TIMEOUT_S, left)
            if conn.sock is not None:
                conn.sock.settimeout(conn.timeout)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            via = getattr(conn, "archprobe_proxy_auth", None)
            if via is not None:   # plain http through a proxy: the absolute URL goes to the proxy
                path = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{path}"
                headers = {**headers, **via}
            conn.request("GET", path, headers=headers)
            raw = conn.getresponse()
            status = raw.status
            hdrs = {k.lower(): v for k, v in raw.getheaders()}
            if status in (200, 206):
                body, keep = self._body(raw, hdrs, url, status, limit, byte_range, sink, end)
                if fired.is_set():   # the watchdog ended the read: what arrived is not the whole answer
                    raise TimeoutError("deadline")
            else:
                body = _read_upto(raw, ERROR_BODY_BYTES, end, conn)
                keep = False
                if fired.is_set():
                    raise TimeoutError("deadline")
            return Response(status, hdrs, body, url)
        except SourceError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if fired.is_set() or time.monotonic() >= end - 0.01:
                what = "the command's deadline" if self.deadline.left() <= 0 else "the request deadline"
                raise TransientError(f"{shown_url(url)}: no complete answer within {left:.3g} s ({what})") from None
            raise TransientError(f"{shown_url(url)}: {type(exc).__name__} ({str(exc)[:80]})") from None
        finally:
            watchdog.cancel()
            if not keep:
                self._drop(parts)

    def _body(self, raw, hdrs, url, status, limit, byte_range, sink, end) -> tuple[bytes, bool]:
        """(the body kept, whether the connection may be reused)."""
        first = 0
        want = limit
        if byte_range is not None:
            want = byte_range[1] - byte_range[0] + 1
            if status == 206:
                got = _content_range(hdrs.get("content-range", ""))
                if got is None or got[0] != byte_range[0] or got[1] > byte_range[1]:
                    raise SourceError(f"{shown_url(url)}: asked for bytes {byte_range[0]}-{byte_range[1]}, the server "
                                      f"answered {hdrs.get('content-range', 'without a Content-Range')!r}")
            else:   # Range ignored: skip to the first byte wanted, stop after the last
                first = byte_range[0]
        if want > limit:
            raise SourceError(f"{shown_url(url)}: {want:,} bytes asked, over the {limit:,}-byte cap")
        length = hdrs.get("content-length")
        if length is not None and length.isdigit() and status == 206 and int(length) > want:
            raise SourceError(f"{shown_url(url)}: the server announces {int(length):,} bytes for a {want:,}-byte range")
        if length is not None and length.isdigit() and byte_range is None and int(length) > limit:
            raise SourceError(f"{shown_url(url)}: the answer is {int(length):,} bytes, over the {limit:,}-byte cap")
        out = bytearray()
        seen = kept = 0
        partial = byte_range is not None and status == 200
        while True:
            chunk = _read1(raw, end)
            if not chunk:
                break
            with self._lock:
                self.bytes_read += len(chunk)
            if seen < first:   # Range ignored: walk over the bytes before the first one wanted
                drop = min(first - seen, len(chunk))
                seen += drop
                chunk = chunk[drop:]
                if not chunk:
                    continue
            seen += len(chunk)
            if len(chunk) > want - kept:
                if not partial:
                    raise SourceError(f"{shown_url(url)}: the server sent more than the {want:,} bytes expected; "
                                      "refused")
                chunk = chunk[: want - kept]
            kept += len(chunk)
            if sink is not None:
                sink(chunk)
            else:
                out += chunk
            if partial and kept == want:
                return bytes(out), False   # we have what we wanted: drop the connection, the rest unread
        # a length-delimited body ends with read1 -> b"" without marking the response closed: close it, so
        # the kept-alive connection can carry the next request (only when the body was read to its end)
        if time.monotonic() >= end:           # the watchdog ended the read: what arrived is not the body
            raise TimeoutError("deadline")
        if raw.length:                         # EOF before Content-Length: a truncated body, not a short one
            raise http.client.IncompleteRead(bytes(out[-16:]), raw.length)
        complete = raw.isclosed() or raw.length == 0
        raw.close()
        return bytes(out), complete and not raw.will_close

    def _connection(self, parts) -> http.client.HTTPConnection:
        pool = self._local.__dict__.setdefault("pool", {})
        key = (parts.scheme, parts.hostname, parts.port)
        conn = pool.get(key)
        if conn is None:
            proxy = proxy_for(parts)
            host, port = (parts.hostname, parts.port) if proxy is None else proxy[:2]
            if parts.scheme == "https":
                conn = http.client.HTTPSConnection(host, port, timeout=IDLE_TIMEOUT_S,
                                                   context=ssl.create_default_context())
                if proxy is not None:   # CONNECT through the proxy; TLS (and its checks) end to end
                    conn.set_tunnel(parts.hostname, parts.port or 443, headers=proxy[2])
            else:
                conn = http.client.HTTPConnection(host, port, timeout=IDLE_TIMEOUT_S)
                if proxy is not None:
                    conn.archprobe_proxy_auth = proxy[2]
            pool[key] = conn
        return conn

    def _drop(self, parts) -> None:
        pool = self._local.__dict__.setdefault("pool", {})
        conn = pool.pop((parts.scheme, parts.hostname, parts.port), None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for conn in self._local.__dict__.get("pool", {}).values():
            conn.close()


def proxy_for(parts) -> tuple[str, int, dict[str, str]] | None:
    """(host, port, headers for the proxy) for the URL `parts`, or None to connect directly (module
    docstring: HTTPS_PROXY / HTTP_PROXY / ALL_PROXY / NO_PROXY, as httpx and requests read them)."""
    import base64
    from urllib.parse import unquote
    from urllib.request import getproxies_environment, proxy_bypass_environment

    proxies = getproxies_environment()
    text = proxies.get(parts.scheme) or proxies.get("all")
    if not text:
        return None
    target = parts.hostname + (f":{parts.port}" if parts.port else "")
    if "no" in proxies and proxy_bypass_environment(target, proxies):
        return None
    shown = f"{parts.scheme.upper()}_PROXY={text[:80]!r}"
    p = urlsplit(text if "://" in text else "http://" + text)
    if p.scheme != "http":
        raise SourceError(f"{shown}: only http:// proxies are supported (not {p.scheme}://)")
    try:
        port = p.port or 80
    except ValueError:
        raise SourceError(f"{shown}: not a valid proxy URL (bad port)") from None
    if not p.hostname:
        raise SourceError(f"{shown}: not a valid proxy URL (no host)")
    headers = {}
    if p.username is not None:
        pair = f"{unquote(p.username)}:{unquote(p.password or '')}".encode()
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(pair).decode()
    return p.hostname, port, headers


class TransientError(SourceError):
    """A connection-level failure (reset, timeout, refused): the caller may retry within the deadline."""


def _read1(raw: http.client.HTTPResponse, end: float) -> bytes:
    if time.monotonic() >= end:
        raise TimeoutError("request deadline")
    return raw.read1(CHUNK)


def _read_upto(raw, limit: int, end: float, conn) -> bytes:
    out = bytearray()
    while len(out) < limit:
        chunk = _read1(raw, end)
        if not chunk:
            break
        out += chunk
    return bytes(out[:limit])


def _shutdown(conn: http.client.HTTPConnection, fired: threading.Event) -> None:
    """The watchdog: wake any blocked read on this connection (close() alone would not)."""
    fired.set()
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _check_url(url: str) -> None:
    """A URL that http.client can be handed: http(s), a host, a valid port (a malformed one is one line)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError as exc:
        raise SourceError(f"{url[:120]!r}: not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SourceError(f"{shown_url(url)}: not an http(s) URL")
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise SourceError(f"{url[:120]!r}: a URL with spaces or control characters")


def _content_range(text: str) -> tuple[int, int] | None:
    """`bytes 0-7/1234` -> (0, 7)."""
    unit, _, rest = text.strip().partition(" ")
    span = rest.split("/")[0]
    first, _, last = span.partition("-")
    if unit.lower() != "bytes" or not first.isdigit() or not last.isdigit() or int(last) < int(first):
        return None
    return int(first), int(last)


def _origin(url: str) -> tuple:
    p = urlsplit(url)
    return p.scheme, p.hostname, p.port


def shown_url(url: str) -> str:
    """A URL for an error message: no query string (tokens live there sometimes), cut short."""
    p = urlsplit(url)
    text = f"{p.scheme}://{p.netloc}{p.path}"
    return text if len(text) <= 160 else text[:157] + "..."
