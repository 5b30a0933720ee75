"""observe end to end: the CLI on the demo (no SOURCE), on a saved checkpoint through validate's stream
(a forced router and a planted NaN found with checkpoint names, the clean twin without findings), and
user mistakes as one line with exit status 2."""

import json
import os
import subprocess
import sys

import pytest
from safetensors.torch import load_file, save_file

from archprobe.observe import observe
from archprobe.writers.synthetic import tiny_k3_dims, write_k3_checkpoint


def run(*args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.abspath("src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "archprobe.cli.main", "observe", *args], capture_output=True,
                          text=True, env=env, timeout=300)


P = "language_model.model.layers."


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """The K3-shaped demo checkpoint twice: clean, and with layer 1's router forced to expert 3 by its
    selection bias, layer 4's expert 6 made unreachable by its bias, and one NaN planted in the last layer's
    shared expert."""
    root = tmp_path_factory.mktemp("observe")
    clean, forced = root / "clean", root / "forced"
    write_k3_checkpoint(clean, tiny_k3_dims(), shards=1, sparse=False, seed=0)
    write_k3_checkpoint(forced, tiny_k3_dims(), shards=1, sparse=False, seed=0)
    shard = next(f for f in os.listdir(forced) if f.endswith(".safetensors"))
    state = load_file(str(forced / shard))
    bias = state[P + "1.block_sparse_moe.gate.e_score_correction_bias"]
    bias.zero_()
    bias[3] = 100.0
    state[P + "5.block_sparse_moe.shared_experts.gate_proj.weight"][0, 0] = float("nan")
    state[P + "4.block_sparse_moe.gate.e_score_correction_bias"][6] = -100.0   # expert 6 can never be chosen
    save_file(state, str(forced / shard))
    return str(clean), str(forced)


def test_demo_by_default():
    r = run("--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "archprobe.observe/1" and doc["tokens"] > 100
    assert doc["routing"] and doc["depth"] and doc["attnres"] and doc["horizons"]
    assert doc["warnings"] == [] and doc["weights"]["nonfinite"] == [] and doc["weights"]["duplicates"] == []
    for r_ in doc["routing"]:
        assert len(r_["load"]) == r_["experts"] and r_["dead"] == []
        assert sum(r_["load"]) == doc["tokens"] * r_["top_k"]


def test_planted_answers_and_clean_twin(twins):
    clean, forced = twins
    c = observe(clean)
    assert c["warnings"] == [] and c["weights"]["nonfinite"] == []
    assert all(r["dead"] == [] for r in c["routing"])
    f = observe(forced)
    nan = P + "5.block_sparse_moe.shared_experts.gate_proj.weight"
    assert f["weights"]["nonfinite"] == [{"tensor": nan, "count": 1}]
    assert any(nan in w for w in f["warnings"])
    # layer 1's router is forced to expert 3
    r4 = next(r for r in f["routing"] if r["layer"] == 4)
    assert r4["dead"] == [6] and r4["load"][6] == 0
    assert any("layer 4: experts never selected" in w for w in f["warnings"])
    r0 = next(r for r in f["routing"] if r["layer"] == 1)
    assert r0["load"][3] == f["tokens"] and r0["imbalance"] == pytest.approx(r0["experts"] / r0["top_k"])


def test_weights_only_and_html(twins, tmp_path):
    clean, _ = twins
    page = tmp_path / "o.html"
    r = run(clean, "--weights-only", "--json", "--html", str(page))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["tokens"] == 0 and doc["weights"]["tensors"] > 0 and doc["routing"] == []
    assert page.read_text().startswith("<!doctype html>")


def test_prompt_file_and_summary(twins, tmp_path):
    clean, _ = twins
    texts = tmp_path / "t.txt"
    texts.write_text("one text here\n\nand a second one")
    r = run(clean, "--prompt-file", str(texts), "--no-weights", "--html", str(tmp_path / "p.html"))
    assert r.returncode == 0, r.stderr
    assert "routing" in r.stdout and "depth" in r.stdout
    assert "<svg" in (tmp_path / "p.html").read_text()


@pytest.mark.parametrize("args", [("--prompt-ids", "1,x"), ("/nonexistent/folder",),
                                  ("--prompt-file", "/nonexistent.txt"), ("--weights-only", "--no-weights")])
def test_user_mistakes_are_one_line(args):
    r = run(*args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
