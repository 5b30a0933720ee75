"""Our own output, read by a strict JSON reader (child process): a layer that went non-finite in
`validate --json` is null with a `non_finite` note, never a bare NaN, and `report --validate-json`
reads the document archprobe wrote; a metrics page whose counters sum past the largest float is
refused, not stored and printed as Infinity."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from tests.support.cli import assert_bounded, run_cli


def strict(text: str):
    def refuse(name):
        raise AssertionError(f"bare {name} in a --json document")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def nonfinite_model(tmp_path_factory):
    from transformers import LlamaConfig

    from tests.support.tiny_models import build

    folder = tmp_path_factory.mktemp("inf-llama")
    build(LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128), folder,
          adjust=lambda m: m.model.layers[1].mlp.down_proj.weight.fill_(float("inf")))
    return str(folder)


def test_validate_json_of_a_non_finite_layer_is_strict_and_report_reads_it(nonfinite_model, tmp_path):
    r = run_cli("validate", nonfinite_model, "--json")
    assert_bounded(r, statuses=(0, 1), rss=1500 * 2**20, wall_s=60)
    doc = strict(r.stdout)
    assert doc["non_finite"] and all(v in ("nan", "inf", "-inf") for v in doc["non_finite"].values())
    (tmp_path / "v.json").write_text(r.stdout)
    r = run_cli("report", nonfinite_model, "--validate-json", str(tmp_path / "v.json"), "--out",
                str(tmp_path / "r.html"))
    assert_bounded(r, ok=True, rss=1500 * 2**20, wall_s=60)


class _Metrics(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *a):
        pass


def test_usage_counters_that_sum_past_the_largest_float_are_refused(tmp_path):
    _Metrics.body = "".join(f'vllm:prompt_tokens_total{{model_name="m",pod="{i}"}} 1.7e308\n'
                            for i in range(3)).encode()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        r = run_cli("track", "usage", f"http://127.0.0.1:{srv.server_port}/metrics", "--subject", "s",
                    "--ledger", str(tmp_path / "l.sqlite"), "--json")
    finally:
        srv.shutdown()
    assert_bounded(r, ok=False, contains="largest number")
    assert "Infinity" not in r.stdout
