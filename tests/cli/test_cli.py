"""The CLI as a user meets it: a real process, --json, one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from safetensors.numpy import save_file

from tests.support.cli import run


def test_inspect_without_source_uses_the_demo(tmp_path):
    r = run("inspect", "--json", env={"ARCHPROBE_CACHE": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "archprobe.inspect/1"
    assert doc["architecture"]["mixers"] == {"kda": 4, "mla": 2}
    assert {"residual.attnres", "moe.latent", "quant.mxfp4", "linear_attention.kda"} <= {
        f["id"] for f in doc["features"]}


def test_demo_human_output(tmp_path):
    r = run("demo", env={"ARCHPROBE_CACHE": str(tmp_path), "COLUMNS": "160"})
    assert r.returncode == 0, r.stderr
    assert "KDA×3, MLA, KDA, MLA" in r.stdout
    assert "residual.attnres" in r.stdout and "quant mxfp4" in r.stdout


def test_missing_source_is_one_line(tmp_path):
    r = run("inspect", str(tmp_path / "nope"))
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_hostile_file_is_one_line_naming_the_file(tmp_path):
    p = tmp_path / "m.safetensors"
    p.write_bytes((10**9).to_bytes(8, "little") + b"{}")
    r = run("inspect", str(p), "--json")
    assert r.returncode == 2
    assert str(p) in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_single_file_source(tmp_path):
    save_file({"model.layers.0.self_attn.q_proj.weight": np.zeros((8, 8), np.float32)}, str(tmp_path / "x.safetensors"))
    r = run("inspect", str(tmp_path / "x.safetensors"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["params"]["total"] == 64
    assert "no config.json" in " ".join(doc["warnings"])


def test_reading_side_imports_without_torch():
    code = ("import sys, archprobe, archprobe.formats, archprobe.structure.inspect, archprobe.cli.main;"
            "import archprobe.formats.hub, archprobe.demo;"
            "assert 'torch' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_validate_cli_on_the_demo_checkpoint(tmp_path):
    from archprobe.writers.synthetic import tiny_k3_dims, write_k3_checkpoint

    write_k3_checkpoint(tmp_path / "k3", tiny_k3_dims(), shards=2, sparse=False)
    r = run("validate", str(tmp_path / "k3"), "--prompt-ids", "1,2,3", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    # no reference: it ran (loaded, finite) and compared nothing, so it is `ran`, never `pass`
    assert doc["status"] == "ran" and len(doc["layers"]) == 6 and doc["peak_rss_bytes"] > 0
    assert doc["reference"] is None and not any("reference" in c for c in doc["checked"])
    r = run("validate", str(tmp_path / "k3"), "--prompt-ids", "1,x")
    assert r.returncode == 2 and r.stderr.startswith("error: --prompt-ids")
