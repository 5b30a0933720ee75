"""A second round of attacks through the real CLI, after the memory, deadline and proxy work: large
(streamed) headers that are malformed, folder tricks, config and index values of the wrong type, JSON
cost bombs at every JSON reader (local, hub, track, report), GGUF name and budget bombs, metrics floods.
Each case: exit 0 or 2, one line, no traceback, within the RSS and time bounds (tests/hostile/_bounded)."""

from __future__ import annotations

import json
import os
import shutil
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.support import hub_server as hs
from tests.support.cli import FAST_ENV, assert_bounded, run_cli

CFG = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 8, "intermediate_size": 16,
       "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 16}
BOMB = b'{"a":[' + b",".join([b"[]"] * 2_500_000) + b"]}"     # 5 MB of text, ~600 MB as Python lists
RSS = 300 * 2**20


def _good(folder, config=CFG):
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"model.embed_tokens.weight": np.zeros((16, 8), np.float32),
               "model.layers.0.mlp.up_proj.weight": np.zeros((16, 8), np.float32)}, str(folder / "model.safetensors"))
    if config is not None:
        (folder / "config.json").write_bytes(config if isinstance(config, bytes) else json.dumps(config).encode())
    return folder


def _streamed(entries: bytes, data: int, path) -> None:
    """A header over 1 MB (read entry by entry), `entries` appended after 30,000 good ones."""
    good = b",".join(b'"t%d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}' % (i, i, i + 1) for i in range(30000))
    raw = b"{" + good + entries
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + data)


@pytest.mark.parametrize("tail, says", [
    (b',"t5x":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":{"deep":[1]}}}', "not a flat JSON object"),
    (b',"\xff\xfe":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', "not valid JSON"),
    (b',"t0":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', "appears twice"),
    (b"} trailing", "data after the object"),
    (b',"z":5}', "not a JSON object"),
    (b',"__metadata__":{"a":[["x"]]}}', "not a flat JSON object"),
    (b',"w":{"dtype":"U8","shape":[1],"data_offsets":[29999,30000]}}', "overlap"),
    (b',"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]', "invalid JSON"),
], ids=["nested", "bad-utf8", "duplicate", "trailing", "scalar-entry", "nested-metadata", "overlap", "unterminated"])
@pytest.mark.parametrize("command", ["inspect", "memory"])
def test_large_headers_that_are_malformed(tmp_path, tail, says, command):
    _good(tmp_path)
    _streamed(tail, 30000, tmp_path / "model.safetensors")
    r = run_cli(command, str(tmp_path), "--json")
    assert_bounded(r, ok=False, contains=says, rss=RSS, wall_s=20)


def test_a_shard_that_is_a_folder(tmp_path):
    _good(tmp_path)
    os.makedirs(tmp_path / "model-00001-of-00002.safetensors")
    shutil.move(tmp_path / "model.safetensors", tmp_path / "model-00002-of-00002.safetensors")
    assert_bounded(run_cli("inspect", str(tmp_path), "--json"), ok=False, contains="a folder")


def test_config_json_linked_out_of_the_folder(tmp_path):
    _good(tmp_path, None)
    os.symlink("/etc/passwd", tmp_path / "config.json")
    assert_bounded(run_cli("inspect", str(tmp_path), "--json"), ok=False, contains="outside the checkpoint folder")


def test_a_symlink_loop(tmp_path):
    _good(tmp_path)
    os.symlink("b.safetensors", tmp_path / "a.safetensors")
    os.symlink("a.safetensors", tmp_path / "b.safetensors")
    assert_bounded(run_cli("inspect", str(tmp_path), "--json"), ok=False, contains="loop")


@pytest.mark.parametrize("config", [b"[1,2,3]", b"", json.dumps({**CFG, "num_hidden_layers": True}).encode(),
                                    json.dumps({**CFG, "hidden_size": 1e308}).encode(), BOMB],
                         ids=["list", "empty", "bool-layers", "huge-float", "cost-bomb"])
def test_config_values_of_the_wrong_kind(tmp_path, config):
    _good(tmp_path, config)
    assert_bounded(run_cli("memory", str(tmp_path), "--json"), ok=False, rss=RSS)


@pytest.mark.parametrize("index", [b'{"weight_map": {"x": 5, "y": null, "z": ["a"]}}', b'{"weight_map": ["a"]}',
                                   BOMB[:-1] + b',"weight_map":{"x":"a.safetensors"}}'],
                         ids=["values-not-names", "a-list", "cost-bomb"])
def test_index_values_of_the_wrong_kind(tmp_path, index):
    _good(tmp_path)
    shutil.move(tmp_path / "model.safetensors", tmp_path / "a.safetensors")
    (tmp_path / "model.safetensors.index.json").write_bytes(index)
    assert_bounded(run_cli("inspect", str(tmp_path), "--json"), ok=False, rss=RSS)


def _gguf(path, body: bytes, n_meta: int, n_tensors: int = 0) -> str:
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_meta) + body)
    return str(path)


def _s(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def test_gguf_key_of_100_kb(tmp_path):
    path = _gguf(tmp_path / "m.gguf", _s(b"k" * 100_000) + struct.pack("<IB", 0, 1), 1)
    assert_bounded(run_cli("inspect", path, "--json"), ok=False, contains="bytes long")


def test_gguf_string_arrays_past_the_kept_budget(tmp_path):
    """8 kept arrays of 60,000 strings of 40 bytes (23 MB of file, ~50 MB as Python strings, charged at
    224 bytes each with the list slots: ~107 MB): refused at the 64 MB budget."""
    one = (_s(b"x" * 40)) * 60_000
    body = b"".join(_s(b"general.s%d" % i) + struct.pack("<IIQ", 9, 8, 60_000) + one for i in range(8))
    r = run_cli("inspect", _gguf(tmp_path / "m.gguf", body, 8), "--json")
    assert_bounded(r, ok=False, contains="64 MB", rss=RSS, wall_s=30)


@pytest.fixture
def hub(tmp_path):
    folder = _good(tmp_path / "repo")
    with hs.HubServer() as server:
        server.add_repo("org/m", str(folder))
        yield server


def _answer(data: bytes, ctype: str = "application/json"):
    def hook(h, head: bool) -> None:
        h.send_response(200)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if not head:
            h.wfile.write(data)
    return hook


@pytest.mark.parametrize("path, body", [
    ("/api/models/org/m/tree/main", b"[" + BOMB[6:-2] + b"]"),
    ("/api/models/org/m/tree/main", json.dumps([{"type": "file", "path": {"a": 1}}, 5, None]).encode()),
    ("/api/models/org/m/tree/main", b"<html>captive portal</html>"),
    ("/org/m/resolve/main/config.json", BOMB),
], ids=["listing-cost-bomb", "listing-rows-of-any-type", "listing-html", "config-cost-bomb"])
def test_hub_answers_that_cost_or_lie(hub, path, body):
    hub.hooks[path] = _answer(body)
    r = run_cli("inspect", "org/m", "--json", env={"HF_ENDPOINT": hub.url, **FAST_ENV})
    assert_bounded(r, ok=False, rss=RSS)


def test_track_reach_model_info_cost_bomb(hub, tmp_path):
    hub.hooks["/api/models/org/m"] = _answer(b'{"siblings":[' + b",".join([b"{}"] * 2_500_000) + b"]}")
    r = run_cli("track", "reach", "org/m", "--ledger", str(tmp_path / "l.sqlite"),
                env={"HF_ENDPOINT": hub.url, **FAST_ENV})
    assert_bounded(r, ok=False, contains="MAX_JSON_COST", rss=RSS)


@pytest.mark.parametrize("lines", [
    b"".join(b'vllm:x_total{model_name="m%d"} 1\n' % i for i in range(60_000)),       # 10k+ series in 2 MB
    b"".join(b'vllm:x_total{model_name="m%d"} 1\n' % i for i in range(450_000)),      # 16 MB: over the cap
], ids=["many-series", "over-the-page-cap"])
def test_track_usage_metrics_floods(hub, tmp_path, lines):
    hub.hooks["/metrics"] = _answer(lines, "text/plain")
    r = run_cli("track", "usage", hub.url + "/metrics", "--subject", "s", "--ledger", str(tmp_path / "l.sqlite"),
                env=FAST_ENV)
    assert_bounded(r, ok=False, rss=RSS, wall_s=20)


@pytest.mark.parametrize("doc", [BOMB, b"[1]", json.dumps({"schema": {"a": 1}}).encode()],
                         ids=["cost-bomb", "a-list", "schema-not-a-string"])
def test_report_validate_json_is_refused_before_the_work(tmp_path, doc):
    _good(tmp_path / "m")
    (tmp_path / "v.json").write_bytes(doc)
    r = run_cli("report", str(tmp_path / "m"), "--validate-json", str(tmp_path / "v.json"), "--out",
                str(tmp_path / "r.html"))
    assert_bounded(r, ok=False, rss=RSS, wall_s=10)


def _laughs() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name, text, says", [
    ("laughs.yaml", _laughs(), "expands to over"),                  # 10^12 values in 12 lines (it hung)
    ("self.yaml", "a: &a [*a]\n", "refers to itself"),
    ("deep.json", "[" * 100_000 + "]" * 100_000, "nests"),           # an internal RecursionError before
    ("deep.yaml", "a:\n" + "".join(" " * i + "- \n" for i in range(1, 200)), "nests"),
    ("big.yaml", "[" + ",".join(["a"] * 200_000) + "]", "cap"),      # PyYAML: ~175x its bytes
    ("fifo.yaml", None, "FIFO"),                                     # open() waited for ever
])
def test_hostile_card_files(tmp_path, name, text, says):
    _good(tmp_path / "m")
    card = tmp_path / name
    if text is None:
        os.mkfifo(card)
    else:
        card.write_text(text)
    r = run_cli("inspect", str(tmp_path / "m"), "--json", "--card", str(card))
    assert_bounded(r, ok=False, contains=says, rss=RSS, wall_s=20)
