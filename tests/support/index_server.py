"""Stand-ins on 127.0.0.1 for a package index (PEP 691 simple JSON or PEP 503 HTML, wheels served with
explicit Range only) and a GitHub-style forge (`/search/issues`, Link pagination, one rate limit).

Both count the body bytes they serve, per path, so tests can hold a reader to "only the bytes it needs".
Real-format wheels are built with `build_wheel`: the registry files at their real paths, padded with
incompressible members so that reading the whole wheel is obviously wasteful.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

RANGE = re.compile(r"^bytes=(\d+)-(\d+)$")


def build_wheel(project: str, version: str, members: dict[str, str], pad_members: int = 40,
                pad_bytes: int = 50_000) -> tuple[str, bytes]:
    """(file name, bytes) of a wheel with `members` (path -> text) and `pad_members` random padding files."""
    dist = project.replace("-", "_")
    name = f"{dist}-{version}-py3-none-any.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(pad_members):   # kernels, data files: incompressible
            z.writestr(f"{dist}/_pad/blob_{i:03d}.bin", os.urandom(pad_bytes))
        for path, text in members.items():
            z.writestr(path, text)
        z.writestr(f"{dist}-{version}.dist-info/METADATA", f"Name: {project}\nVersion: {version}\n")
    return name, buf.getvalue()


class _Server:
    def __init__(self) -> None:
        self.served: dict[str, int] = {}
        self.requests: list[tuple[str, dict]] = []
        self.hooks: dict[str, object] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path = urlparse(self.path).path
                with server._lock:
                    server.requests.append((self.path, dict(self.headers)))
                hook = server.hooks.get(path)
                if hook is not None:
                    hook(self)
                    return
                server.handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def send(self, h, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
        with self._lock:
            path = urlparse(h.path).path
            self.served[path] = self.served.get(path, 0) + len(body)


class IndexServer(_Server):
    """`/simple/<project>/` and `/files/<wheel>`; `html=True` answers PEP 503 HTML instead of JSON."""

    def __init__(self, html: bool = False) -> None:
        super().__init__()
        self.projects: dict[str, list[tuple[str, bytes]]] = {}
        self.html = html

    def add(self, project: str, version: str, members: dict[str, str], **pad) -> str:
        name, data = build_wheel(project, version, members, **pad)
        self.projects.setdefault(project, []).append((name, data))
        return name

    def wheel_bytes(self, name: str) -> int:
        return next(len(d) for files in self.projects.values() for n, d in files if n == name)

    def handle(self, h) -> None:
        path = urlparse(h.path).path
        m = re.match(r"^/simple/([^/]+)/$", path)
        if m:
            files = self.projects.get(m.group(1))
            if files is None:
                return self.send(h, 404, b"not found")
            if self.html:
                body = "".join(f'<a href="/files/{n}#sha256={hashlib.sha256(d).hexdigest()}">{n}</a><br/>\n'
                               for n, d in files)
                return self.send(h, 200, f"<html><body>{body}</body></html>".encode(),
                                 {"Content-Type": "text/html"})
            doc = {"meta": {"api-version": "1.1"}, "name": m.group(1),
                   "files": [{"filename": n, "url": f"/files/{n}", "hashes": {"sha256": hashlib.sha256(d).hexdigest()},
                              "size": len(d), "yanked": False} for n, d in files]}
            return self.send(h, 200, json.dumps(doc).encode(), {"Content-Type": "application/vnd.pypi.simple.v1+json"})
        m = re.match(r"^/files/([^/]+)$", path)
        if m:
            data = next((d for files in self.projects.values() for n, d in files if n == m.group(1)), None)
            if data is None:
                return self.send(h, 404, b"not found")
            r = RANGE.match(h.headers.get("Range", ""))
            if not r:   # suffix ranges (bytes=-N) and whole-file reads are refused: explicit ranges only
                return self.send(h, 416, b"explicit start-end ranges only")
            first, last = int(r.group(1)), min(int(r.group(2)), len(data) - 1)
            return self.send(h, 206, data[first:last + 1],
                             {"Content-Range": f"bytes {first}-{last}/{len(data)}"})
        self.send(h, 404, b"not found")


class ForgeServer(_Server):
    """`/search/issues` in GitHub's answer format: `items` per repo, `per_page` pages linked with `Link`,
    and a rate limit answered once (403 + x-ratelimit-remaining: 0 + x-ratelimit-reset) when `limit_once`."""

    def __init__(self, per_page: int = 2, limit_once: str | None = "reset", wait_s: int = 1,
                 limit_at: int = 0) -> None:
        super().__init__()
        self.limit_at = limit_at   # which search request (0 = the first) is answered with the rate limit
        self.searches = 0
        self.items: dict[str, list[dict]] = {}
        self.per_page = per_page
        self.limit_once = limit_once
        self.wait_s = wait_s
        self.limited_at: float | None = None
        self.queries: list[str] = []

    def handle(self, h) -> None:
        u = urlparse(h.path)
        pull = re.match(r"^/repos/([^/]+/[^/]+)/pulls/(\d+)$", u.path)
        if pull:   # the pull itself: `merged`, for hits written without `pull_request.merged_at`
            it = next((i for i in self.items.get(pull.group(1), []) if i["number"] == int(pull.group(2))), None)
            if it is None:
                return self.send(h, 404, b'{"message": "Not Found"}')
            return self.send(h, 200, json.dumps({"number": it["number"], "merged": it.get("_merged", False)}).encode())
        if u.path != "/search/issues":
            return self.send(h, 404, b'{"message": "Not Found"}')
        self.searches += 1
        if self.limit_once and self.limited_at is None and self.searches > self.limit_at:
            self.limited_at = time.time()
            headers = ({"Retry-After": str(self.wait_s)} if self.limit_once == "retry-after" else
                       {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + self.wait_s)})
            status = 429 if self.limit_once == "retry-after" else 403
            return self.send(h, status, b'{"message": "API rate limit exceeded"}', headers)
        qs = parse_qs(u.query)
        q = qs.get("q", [""])[0]
        self.queries.append(q)
        repo = re.search(r"repo:(\S+)", q).group(1)
        page = int(qs.get("page", ["1"])[0])
        items = self.items.get(repo, [])
        chunk = items[(page - 1) * self.per_page: page * self.per_page]
        headers = {"Content-Type": "application/json"}
        if page * self.per_page < len(items):
            nxt = f"{self.url}/search/issues?q={qs['q'][0]}&per_page={self.per_page}&page={page + 1}"
            headers["Link"] = f'<{nxt.replace(" ", "+")}>; rel="next", <{self.url}/x>; rel="last"'
        body = {"total_count": len(items), "incomplete_results": False, "items": chunk}
        self.send(h, 200, json.dumps(body).encode(), headers)


def gh_item(repo: str, number: int, title: str, kind: str, state: str = "open", draft: bool = False,
            merged: bool = False, labels: tuple[str, ...] = (), without_merged_at: bool = False) -> dict:
    """One search hit as GitHub's REST API writes it (the fields archprobe reads, and some it does not)."""
    html = f"https://github.com/{repo}/{'pull' if kind == 'pr' else 'issues'}/{number}"
    item = {"url": f"https://api.github.com/repos/{repo}/issues/{number}", "html_url": html, "number": number,
            "title": title, "state": state, "locked": False, "labels": [{"id": 1, "name": n} for n in labels],
            "user": {"login": "someone"}, "comments": 3, "created_at": "2026-01-02T03:04:05Z",
            "updated_at": f"2026-03-{number % 28 + 1:02d}T00:00:00Z", "closed_at": None, "body": "...",
            "score": 1.0}
    if kind == "pr":
        item["draft"] = draft
        item["pull_request"] = {"url": f"https://api.github.com/repos/{repo}/pulls/{number}", "html_url": html,
                                "merged_at": "2026-03-01T00:00:00Z" if merged else None}
        if without_merged_at:   # an older answer: only the pull itself says whether it was merged
            del item["pull_request"]["merged_at"]
            item["_merged"] = merged
    return item
