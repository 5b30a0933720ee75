"""The guarded HTTP reader honours HTTPS_PROXY / HTTP_PROXY / NO_PROXY as httpx and requests do, through a
real proxy on 127.0.0.1 (tests/hostile/_proxy.py), and verifies https certificates against the system
store or SSL_CERT_FILE (a self-signed test CA, made with the openssl command line)."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from safetensors.numpy import save_file

from archprobe.errors import SourceError
from archprobe.formats.http import GuardedHTTP
from tests.support import hub_server as hs
from tests.support.cli import FAST_ENV, assert_bounded, run_cli
from tests.support.proxy import Proxy

REPO = "org/m"
NO_ENV_PROXY = {k: "" for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
                                "http_proxy", "https_proxy", "all_proxy", "no_proxy")}


@pytest.fixture
def hub(tmp_path):
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 1}))
    save_file({"model.layers.0.mlp.up_proj.weight": np.zeros((8, 8), np.float32)},
              str(folder / "model.safetensors"))
    with hs.HubServer() as server:
        server.add_repo(REPO, str(folder))
        yield server


def _inspect(server, **env):
    """The CLI against the hub with exactly the proxy variables given (an empty lower-case one would
    cancel its upper-case twin, as urllib, httpx and requests all read them)."""
    given = {k.lower() for k in env}
    blank = {k: "" for k in NO_ENV_PROXY if k.lower() not in given}
    return run_cli("inspect", REPO, "--json", env={"HF_ENDPOINT": server.url, **FAST_ENV, **blank, **env})


def test_http_proxy_carries_every_request(hub):
    with Proxy() as proxy:
        r = _inspect(hub, HTTP_PROXY=proxy.url)
    assert_bounded(r, ok=True)
    assert json.loads(r.stdout)["storage"]["files"] == 1
    paths = [p for _, p in proxy.seen]
    assert paths and all(p.startswith(hub.url + "/") for p in paths), paths
    assert any(p.endswith("model.safetensors") for p in paths), paths


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "*", "localhost,127.0.0.1", f"127.0.0.1:{0}"])
def test_no_proxy_reaches_the_server_directly(hub, no_proxy):
    port = hub.url.rsplit(":", 1)[1]
    no_proxy = no_proxy.replace(":0", f":{port}")
    with Proxy() as proxy:
        r = _inspect(hub, HTTP_PROXY=proxy.url, NO_PROXY=no_proxy)
    assert_bounded(r, ok=True)
    assert proxy.seen == []


def test_lower_case_variables_and_proxy_credentials(hub):
    with Proxy(user="u", password="p@ss") as proxy:
        good = _inspect(hub, http_proxy=proxy.url.replace("://", "://u:p%40ss@"))
        bad = _inspect(hub, http_proxy=proxy.url.replace("://", "://u:wrong@"))
    assert_bounded(good, ok=True)
    assert_bounded(bad, ok=False)
    assert "407" in bad.stderr


@pytest.mark.parametrize("value", ["socks5://127.0.0.1:1080", "https://127.0.0.1:3128", "http://127.0.0.1:99999"])
def test_unsupported_or_broken_proxy_settings_are_one_line(hub, value):
    assert_bounded(_inspect(hub, HTTP_PROXY=value), ok=False, contains="PROXY")


def test_a_dead_proxy_is_one_line_within_the_deadline(hub):
    dead = Proxy()
    url = dead.url
    dead.httpd.server_close()    # the port is closed: connection refused
    assert_bounded(_inspect(hub, HTTP_PROXY=url), ok=False)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """An https server on 127.0.0.1 with a self-signed certificate for 127.0.0.1 and localhost."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command line is needed to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem")], check=True, capture_output=True)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(d / "cert.pem"), str(d / "key.pem"))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}", str(d / "cert.pem")
    httpd.shutdown()
    httpd.server_close()


def _clear_proxies(monkeypatch):
    for k in NO_ENV_PROXY:
        monkeypatch.delenv(k, raising=False)


def test_https_through_connect_with_ssl_cert_file(tls_server, monkeypatch):
    url, cert = tls_server
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    with Proxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        resp = GuardedHTTP().get(url + "/x", 1024)
    assert resp.status == 200 and json.loads(resp.body) == {"ok": True}
    assert proxy.seen == [("CONNECT", url.removeprefix("https://"))]


def test_an_untrusted_certificate_is_refused_through_the_proxy_too(tls_server, monkeypatch):
    url, _ = tls_server
    _clear_proxies(monkeypatch)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with Proxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        with pytest.raises(SourceError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            GuardedHTTP().get(url + "/x", 1024)
    assert proxy.seen                 # it did go through the proxy, and TLS was still checked end to end
