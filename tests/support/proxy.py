"""A real forwarding proxy on 127.0.0.1 for the proxy tests: absolute-URL GETs are forwarded, CONNECT is
tunnelled byte for byte; every request line is recorded; optional Basic auth (407 without it)."""

from __future__ import annotations

import base64
import http.client
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


class Proxy:
    def __init__(self, user: str | None = None, password: str = ""):
        self.seen: list[tuple[str, str]] = []
        self.auth = None if user is None else "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _allowed(self) -> bool:
                proxy.seen.append((self.command, self.path))
                if proxy.auth is not None and self.headers.get("Proxy-Authorization") != proxy.auth:
                    self.send_response(407)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return False
                return True

            def do_GET(self):
                if not self._allowed():
                    return
                url = urlsplit(self.path)
                conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "proxy-authorization"}
                conn.request("GET", url.path + (f"?{url.query}" if url.query else ""), headers=headers)
                resp = conn.getresponse()
                body = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                conn.close()

            def do_CONNECT(self):
                if not self._allowed():
                    return
                host, _, port = self.path.rpartition(":")
                upstream = socket.create_connection((host, int(port)), timeout=10)
                self.send_response(200, "Connection established")
                self.end_headers()
                self.wfile.flush()
                ends = [self.connection, upstream]
                try:
                    while True:
                        ready, _, _ = select.select(ends, [], [], 10)
                        if not ready:
                            return
                        for s in ready:
                            data = s.recv(65536)
                            if not data:
                                return
                            (upstream if s is self.connection else self.connection).sendall(data)
                finally:
                    upstream.close()
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Proxy:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
