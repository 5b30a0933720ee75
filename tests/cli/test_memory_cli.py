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


def test_memory_sizing_cli(tmp_path):
    env = {"ARCHPROBE_CACHE": str(tmp_path)}
    r = run("memory", "--gpu", "h200", "--engine", "vllm", "--budget", "2x80GB", "--json", env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    for key in ("device", "devices", "layout", "per_device", "busiest_device_bytes", "usable_device_bytes", "fits",
                "largest_fitting_context", "capped_at_model_max", "engine", "bounds"):
        assert key in doc
    assert doc["devices"] == 2 and len(doc["per_device"]) == 2 and doc["engine"]["name"] == "vllm"
    assert doc["largest_fitting_context"] == 1048576 and doc["capped_at_model_max"]   # the demo's own maximum
    r = run("memory", "--gpu", "h200", "--json", env=env)
    assert json.loads(r.stdout)["devices_needed"] == 1


def test_memory_sizing_bad_input_one_line(tmp_path):
    env = {"ARCHPROBE_CACHE": str(tmp_path)}
    for args, text in ((("--gpu", "h2OO"), "unknown device"), (("--tp", "3"), "does not divide"),
                       (("--budget", "100KB"), "weights alone")):
        r = run("memory", *args, env=env)
        assert r.returncode == 2 and text in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "Traceback" not in r.stderr


def test_report_takes_the_sizing_options(tmp_path):
    env = {"ARCHPROBE_CACHE": str(tmp_path)}
    out = tmp_path / "r.html"
    r = run("report", "--gpu", "h200", "--engine", "vllm", "--budget", "2x80GB", "--out", str(out), "--json", env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["sizing"]["devices"] == 2 and doc["sizing"]["engine"]["name"] == "vllm"
    assert "<section id=sizing>" in out.read_text() and "TP2" in out.read_text()
    r = run("report", "--gpu", "h200", "--engine", "sglang", "--mem-fraction-static", "0.8", "--mtp",
            "--weight-dtype", "fp8", "--out", str(out), "--json", env=env)
    assert r.returncode == 0, r.stderr
    z = json.loads(r.stdout)["sizing"]
    assert any("mem_fraction_static 0.8 (given)" in a for a in z["assumptions"]) and z["weight_dtype"] == "fp8"
    r = run("report", "--gpu", "h2OO", "--out", str(out), env=env)
    assert r.returncode == 2 and "unknown device" in r.stderr
