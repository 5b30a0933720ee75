"""A small model-hub stand-in on 127.0.0.1 for tests and benchmarks.

Serves folders as repos (`add_repo(repo, folder, revision)` serves another folder at that revision):
the tree listing (`/api/models/{repo}/tree/{rev}`), `resolve` URLs with
HTTP Range and HEAD (ETag, X-Repo-Commit, Content-Length), and a `revision` endpoint. Knobs for
failure tests: `fail[path] = [429, 500, ...]` answers those statuses first; `gated` repos answer 401
with `X-Error-Code: GatedRepo`; `hooks[path] = fn(handler, head)` answers a path (query string
ignored) however the test likes (the hostile behaviours below: infinite body, drip, ignored Range,
lying Content-Length, redirects, endless pages); `listing_extra[repo]` adds rows to a listing.
Every response body's size is logged in `served`.

Digests are the real ones, as the hub computes them: `lfs.oid` in the tree listing and `lfs.sha256` in the
model info with `?blobs=true` are the sha256 of the file's bytes (.safetensors and .gguf files are LFS), `oid`
/ `blobId` the git blob id of the bytes (of the LFS pointer for LFS files). A file over `hash_limit` bytes
(the sparse stand-ins of terabyte checkpoints) gets a digest derived from its name and size instead, so a
listing never reads a terabyte.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HubServer:
    def __init__(self) -> None:
        self.repos: dict[str, str] = {}
        self.revisions: dict[tuple[str, str], str] = {}   # (repo, revision) -> folder; else repos[repo]
        self.gated: set[str] = set()
        self.fail: dict[str, list[int]] = {}
        self.hooks: dict[str, object] = {}
        self.listing_extra: dict[str, list[dict]] = {}
        self.stats: dict[str, dict] = {}   # repo -> {"downloads", "likes", "lastModified"} for model info
        self.served: list[tuple[str, str, int]] = []   # (method, path, body bytes)
        self.active = 0
        self.max_active = 0
        self.delay_s = 0.0
        self.hash_limit = 256 << 20
        self.nested = False          # True: subfolders' files are listed and served too (as `sub/name`)
        self._digests: dict[tuple, str] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                server._handle(self, head=True)

            def do_GET(self):
                server._handle(self, head=False)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def add_repo(self, repo_id: str, folder: str, revision: str | None = None) -> None:
        if revision is None:
            self.repos[repo_id] = folder
        else:
            self.repos.setdefault(repo_id, folder)
            self.revisions[(repo_id, revision)] = folder

    def folder(self, repo_id: str, revision: str) -> str:
        return self.revisions.get((repo_id, revision), self.repos[repo_id])

    def bytes_served(self, predicate=lambda path: True) -> int:
        return sum(n for _, p, n in self.served if predicate(p))

    def _send(self, h, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)) if not (headers or {}).get("Content-Length") else
                      headers["Content-Length"])
        h.end_headers()
        if not head and body:
            h.wfile.write(body)
        with self._lock:
            self.served.append(("HEAD" if head else "GET", h.path, 0 if head else len(body)))

    def _handle(self, h, head: bool) -> None:
        import time

        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if self.delay_s:
                time.sleep(self.delay_s)
            self._route(h, head)
        finally:
            with self._lock:
                self.active -= 1

    def _route(self, h, head: bool) -> None:
        path = unquote(urlparse(h.path).path)
        hook = self.hooks.get(path)
        if hook is not None:
            try:
                hook(h, head)
            except OSError:   # the client gave up (as it should)
                pass
            return
        queue = self.fail.get(path)
        if queue:
            status = queue.pop(0)
            self._send(h, status, b'{"error": "injected"}', {"Retry-After": "0"}, head)
            return
        m = re.match(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)(/.*)?$", path)
        if m:
            return self._tree(h, m.group(1), m.group(2), head)
        m = re.match(r"^/api/models/([^/]+/[^/]+)(/revision/[^/]+)?$", path)
        if m:
            repo = m.group(1)
            if (err := self._repo_error(repo)) is not None:
                return self._send(h, *err, head=head)
            blobs = "blobs=true" in urlparse(h.path).query
            body = json.dumps({"id": repo, "sha": COMMIT, **self.stats.get(repo, {}), "siblings": [
                self._sibling(repo, f) if blobs else {"rfilename": f}
                for f in sorted(os.listdir(self.repos[repo]))]}).encode()
            return self._send(h, 200, body, {"Content-Type": "application/json"}, head)
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            return self._file(h, m.group(1), m.group(2), m.group(3), head)
        self._send(h, 404, b"not found", {"X-Error-Code": "EntryNotFound"}, head)

    def _repo_error(self, repo: str):
        if repo not in self.repos:
            return 404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"}
        if repo in self.gated:
            return 401, b'{"error": "gated"}', {"X-Error-Code": "GatedRepo"}
        return None

    def _tree(self, h, repo: str, revision: str, head: bool) -> None:
        if (err := self._repo_error(repo)) is not None:
            return self._send(h, *err, head=head)
        folder = self.folder(repo, revision)
        rows = []
        for name in self._names(folder):
            p = os.path.join(folder, name)
            if os.path.isfile(p):
                size = os.path.getsize(p)
                if _is_lfs(name):
                    sha = self.sha256(p)
                    row = {"type": "file", "path": name, "size": size, "oid": _git_oid(_pointer(sha, size)),
                           "lfs": {"size": size, "oid": sha, "pointerSize": len(_pointer(sha, size))}}
                else:
                    row = {"type": "file", "path": name, "size": size, "oid": self._git_oid_of(p)}
                rows.append(row)
        rows += self.listing_extra.get(repo, [])
        self._send(h, 200, json.dumps(rows).encode(), {"Content-Type": "application/json"}, head)

    def _names(self, folder: str) -> list[str]:
        """The repo's file paths: the top folder's files, and with `nested` those of its subfolders too."""
        if not self.nested:
            return sorted(os.listdir(folder))
        return sorted(os.path.relpath(os.path.join(root, n), folder).replace(os.sep, "/")
                      for root, _, names in os.walk(folder) for n in names)

    def sha256(self, path: str) -> str:
        """The sha256 of the file's bytes (name and size based over `hash_limit`), cached per size and mtime."""
        return self._digest("sha256", path)

    def _git_oid_of(self, path: str) -> str:
        return self._digest("git", path)

    def _digest(self, kind: str, path: str) -> str:
        st = os.stat(path)
        key = (kind, path, st.st_size, st.st_mtime_ns)
        if key not in self._digests:
            if st.st_size > self.hash_limit:
                data = f"{os.path.basename(path)}:{st.st_size}".encode()
            else:
                with open(path, "rb") as f:
                    data = f.read()
            self._digests[key] = hashlib.sha256(data).hexdigest() if kind == "sha256" else _git_oid(data)
        return self._digests[key]

    def _sibling(self, repo: str, name: str) -> dict:
        p = os.path.join(self.repos[repo], name)
        size = os.path.getsize(p)
        if not _is_lfs(name):
            return {"rfilename": name, "size": size, "blobId": self._git_oid_of(p)}
        sha = self.sha256(p)
        return {"rfilename": name, "size": size, "blobId": _git_oid(_pointer(sha, size)),
                "lfs": {"sha256": sha, "size": size, "pointerSize": len(_pointer(sha, size))}}

    def _file(self, h, repo: str, revision: str, name: str, head: bool) -> None:
        if (err := self._repo_error(repo)) is not None:
            return self._send(h, *err, head=head)
        p = os.path.join(self.folder(repo, revision), name)
        if ("/" in name and not (self.nested and ".." not in name.split("/"))) or not os.path.isfile(p):
            return self._send(h, 404, b"entry not found", {"X-Error-Code": "EntryNotFound"}, head)
        size = os.path.getsize(p)
        etag = '"' + hashlib.sha256(name.encode()).hexdigest() + '"'
        base = {"ETag": etag, "X-Repo-Commit": COMMIT, "Accept-Ranges": "bytes", "X-Linked-Size": str(size),
                "X-Linked-Etag": etag}
        rng = h.headers.get("Range")
        if head:
            return self._send(h, 200, b"", {**base, "Content-Length": str(size)}, head=True)
        with open(p, "rb") as f:
            if rng:
                m = re.match(r"bytes=(\d+)-(\d*)$", rng)
                start = int(m.group(1))
                end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
                f.seek(start)
                body = f.read(max(0, end - start + 1))
                return self._send(h, 206, body, {**base, "Content-Range": f"bytes {start}-{end}/{size}"})
            body = f.read()
        self._send(h, 200, body, base)


def _is_lfs(name: str) -> bool:
    return name.endswith((".safetensors", ".gguf"))


def _pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file git stores in place of the bytes."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _git_oid(data: bytes) -> str:
    """git's blob id: sha1 of `blob <size>\\0` and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ---- hostile behaviours for `hooks` (each takes the request handler and whether it is a HEAD) ----

def infinite_body(h, head: bool) -> None:
    """200, chunked, never ends."""
    h.send_response(200)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    chunk = b"x" * 65536
    while True:
        h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))


def drip(interval_s: float, body: bytes = b"{" + b" " * 100000):
    """200 with an honest Content-Length, then one byte every `interval_s`."""
    import time

    def hook(h, head: bool) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        for i in range(len(body)):
            h.wfile.write(body[i:i + 1])
            h.wfile.flush()
            time.sleep(interval_s)
    return hook


def stall_headers(h, head: bool) -> None:
    """Sends the status line, then header bytes one every 0.5 s, for ever."""
    import time

    h.wfile.write(b"HTTP/1.1 200 OK\r\n")
    while True:
        h.wfile.write(b"X")
        h.wfile.flush()
        time.sleep(0.5)


def ignore_range(folder: str, name: str, pad: int = 0):
    """Answers every request with the whole file (200), Range ignored, plus `pad` extra bytes."""
    def hook(h, head: bool) -> None:
        with open(os.path.join(folder, name), "rb") as f:
            body = f.read() + b"\0" * pad
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return hook


def lying_length(claimed: int, sent: bytes, status: int = 206, content_range: str | None = "bytes 0-7/100"):
    """Claims `claimed` bytes, sends `sent` and closes."""
    def hook(h, head: bool) -> None:
        h.send_response(status)
        h.send_header("Content-Length", str(claimed))
        if content_range:
            h.send_header("Content-Range", content_range)
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(sent)
        h.close_connection = True
    return hook


def redirect_to(location: str):
    def hook(h, head: bool) -> None:
        h.send_response(302)
        h.send_header("Location", location)
        h.send_header("Content-Length", "0")
        h.end_headers()
    return hook


def endless_pages(rows: list[dict]):
    """A listing page that always links to one more page."""
    def hook(h, head: bool) -> None:
        import urllib.parse

        q = urllib.parse.parse_qs(urllib.parse.urlparse(h.path).query)
        n = int(q.get("cursor", ["0"])[0]) + 1
        base = h.path.split("?")[0]
        body = json.dumps(rows).encode()
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Link", f'<http://{h.headers["Host"]}{base}?recursive=true&cursor={n}>; rel="next"')
        h.end_headers()
        h.wfile.write(body)
    return hook
