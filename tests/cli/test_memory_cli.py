"""`archprobe memory` as a user runs it."""

from __future__ import annotations

import json

from tests.support.cli import run


def test_memory_json_contract(tmp_path):
    r = run("memory", "--context", "128k", "--batch", "4", "--json", env={"ARCHPROBE_CACHE": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "archprobe.memory/1"
    assert (doc["context"], doc["batch"]) == (131072, 4)
    for key in ("weight_dtype", "kv_dtype", "weights_bytes", "cache_bytes", "cache_by_layer_type", "activation_bytes",
                "peak_bytes", "assumptions"):
        assert key in doc
    assert set(doc["cache_by_layer_type"]) == {"kda", "mla"}
    assert doc["peak_bytes"] == doc["weights_bytes"] + doc["cache_bytes"] + doc["activation_bytes"]


def test_memory_sweep_plot_and_budget(tmp_path):
    png = tmp_path / "mem.png"
    r = run("memory", "--sweep", "4k,32k,128k,1M", "--plot", str(png), "--budget", "1GB",
            env={"ARCHPROBE_CACHE": str(tmp_path), "COLUMNS": "160"})
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "largest context that fits" in r.stdout and "1,048,576" in r.stdout


def test_memory_bad_input_is_one_line(tmp_path):
    r = run("memory", "--context", "lots", env={"ARCHPROBE_CACHE": str(tmp_path)})
    assert r.returncode == 2 and r.stderr.startswith("error: --context 'lots': not a token count")
    assert "Traceback" not in r.stderr
    r = run("memory", "--kv-dtype", "fp5", env={"ARCHPROBE_CACHE": str(tmp_path)})
    assert r.returncode == 2 and "unknown dtype" in r.stderr
