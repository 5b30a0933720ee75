"""`track` against a local hub server and a local Prometheus /metrics server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from archprobe.errors import ArchprobeError
from archprobe.eval.ledger import Ledger
from archprobe.track.ratio import ratio
from archprobe.track.reach import hub_reach
from archprobe.track.store import record, series
from archprobe.track.usage import scrape
from tests.support.cli import run
from tests.support.hub_server import HubServer


class MetricsServer:
    """A vLLM-style /metrics endpoint whose counters the test advances."""

    def __init__(self):
        self.tokens = 0
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                body = (
                    "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
                    "# TYPE vllm:generation_tokens_total counter\n"
                    f'vllm:generation_tokens_total{{model_name="k3"}} {outer.tokens}\n'
                    "# TYPE vllm:request_success_total counter\n"
                    f'vllm:request_success_total{{finished_reason="stop",model_name="k3"}} {outer.requests}\n'
                    f'vllm:request_success_total{{finished_reason="length",model_name="k3"}} 1\n'
                    "# TYPE vllm:num_requests_running gauge\n"
                    'vllm:num_requests_running{model_name="k3"} 3\n'
                    "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n").encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        (repo / name).write_text("{}")
    with HubServer() as srv:
        srv.add_repo("moonshotai/Kimi-K3", str(repo))
        srv.add_repo("someone/Kimi-K3-mirror", str(repo))
        srv.stats["moonshotai/Kimi-K3"] = {"downloads": 1200, "likes": 30, "lastModified": "2026-11-20T10:00:00.000Z"}
        srv.stats["someone/Kimi-K3-mirror"] = {"downloads": 80, "likes": 2}
        monkeypatch.setenv("HF_ENDPOINT", srv.url)
        yield srv


def test_reach_from_the_hub(hub):
    got = dict(hub_reach("moonshotai/Kimi-K3"))
    assert got["downloads_30d"] == 1200 and got["likes"] == 30 and got["files"] == 3 and got["shards"] == 2
    with pytest.raises(ArchprobeError, match="no such model repo"):
        hub_reach("nobody/nothing")


def test_usage_from_metrics():
    with MetricsServer() as m:
        m.tokens, m.requests = 500, 7
        got = {name: (value, labels) for name, value, labels in scrape(m.url)}
    assert got["vllm:generation_tokens_total"] == (500.0, {"model_name": "k3"})
    assert got["vllm:request_success_total"][0] == 8.0         # summed over finished_reason
    assert got["vllm:num_requests_running"][0] == 3.0
    assert "process_cpu_seconds_total" not in got


def test_snapshots_store_and_plot_apart(hub, tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    with MetricsServer() as m:
        for step in range(3):
            hub.stats["moonshotai/Kimi-K3"]["downloads"] = 1200 + 100 * step
            m.tokens, m.requests = 1000 * step, 10 * step
            r = run("track", "reach", "moonshotai/Kimi-K3", "--mirror", "someone/Kimi-K3-mirror", "--ledger",
                    ledger, "--json", env={"HF_ENDPOINT": hub.url})
            assert r.returncode == 0, r.stderr
            r = run("track", "usage", m.url, "--subject", "moonshotai/Kimi-K3", "--ledger", ledger, "--json")
            assert r.returncode == 0, r.stderr
    plot = tmp_path / "track.png"
    r = run("track", "show", "moonshotai/Kimi-K3", "--ledger", ledger, "--plot", str(plot), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    downloads = next(s for s in doc["reach"] if s["metric"] == "downloads_30d" and s["source"] == "moonshotai/Kimi-K3")
    assert [v for _, v in downloads["points"]] == [1200, 1300, 1400]
    tokens = next(s for s in doc["usage"] if s["metric"] == "vllm:generation_tokens_total")
    assert [v for _, v in tokens["points"]] == [0, 1000, 2000]
    assert any(s["source"] == "someone/Kimi-K3-mirror" for s in doc["reach"])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a ratio of reach to usage is refused, with the reason
    r = run("track", "show", "moonshotai/Kimi-K3", "--ledger", ledger,
            "--ratio", "vllm:generation_tokens_total/downloads_30d")
    assert r.returncode == 2 and "refused" in r.stderr and "reach" in r.stderr and "usage" in r.stderr
    # within one kind a ratio is fine (tokens per successful request)
    r = run("track", "show", "moonshotai/Kimi-K3", "--ledger", ledger, "--json",
            "--ratio", "vllm:generation_tokens_total/vllm:request_success_total")
    assert r.returncode == 0, r.stderr
    assert [v for _, v in json.loads(r.stdout)["ratio"]["points"]] == [0, 1000 / 11, 2000 / 21]


def test_signals_are_append_only_and_kinds_checked(tmp_path):
    import sqlite3

    book = Ledger(tmp_path / "l.sqlite")
    record(book, "reach", "r", "r", [("likes", 3)])
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        book.db.execute("UPDATE signals SET value=0")
    with pytest.raises(sqlite3.IntegrityError):
        book.db.execute("INSERT INTO signals (at, kind, subject, source, metric, value, labels) "
                        "VALUES (0, 'vibes', 'r', 'r', 'x', 1, '{}')")
    with pytest.raises(ArchprobeError, match="refused"):
        record(book, "usage", "r", "u", [("vllm:x_total", 1)])
        ratio(series(book, "r"), "likes/vllm:x_total")


def test_bad_inputs_are_one_line(tmp_path):
    r = run("track", "usage", "http://127.0.0.1:9/metrics", "--subject", "x", "--ledger", str(tmp_path / "l"))
    assert r.returncode == 2 and "cannot scrape" in r.stderr and "Traceback" not in r.stderr
    r = run("track", "show", "x", "--ledger", str(tmp_path / "none.sqlite"))
    assert r.returncode == 2 and "no ledger here" in r.stderr
