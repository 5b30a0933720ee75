"""`report`: the page renders offline in headless Chromium (Debian's package, driven by Playwright),
without console errors or network requests, and its key numbers equal inspect/memory --json."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.support.cli import run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRE = os.environ.get("ARCHPROBE_REQUIRE_BROWSER") == "1"   # .ci/run installs chromium and sets this
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def render_in_chromium(page_path, shot_path) -> dict:
    if CHROMIUM is None:
        if REQUIRE:
            pytest.fail("chromium is required here (ARCHPROBE_REQUIRE_BROWSER=1) but not installed")
        pytest.skip("no chromium on this machine; `make test` installs it where apt-get works")
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright (the browser extra) is not installed")
    errors, requests = [], []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(f"file://{page_path}")
        page.wait_for_load_state("load")
        page.screenshot(path=str(shot_path), full_page=True)
        values = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('[data-value]')]
                                   .map(e => [e.id, e.dataset.value]))""")
        statuses = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('[data-status]')]
                                    .map(e => [e.parentElement.id, e.dataset.status]))""")
        text = page.inner_text("body")
        browser.close()
    return {"errors": errors, "requests": requests, "values": values, "statuses": statuses, "text": text}


def check_page(tmp_path, source_args, context="32k"):
    page = tmp_path / "report.html"
    r = run("report", *source_args, "--out", str(page), "--context", context, "--budget", "80GB")
    assert r.returncode == 0, r.stderr
    inspect_doc = json.loads(run("inspect", *source_args, "--json").stdout)
    memory_doc = json.loads(run("memory", *source_args, "--context", context, "--json").stdout)
    got = render_in_chromium(page, tmp_path / "shot.png")
    assert got["errors"] == []
    assert all(u.startswith(("file://", "data:")) for u in got["requests"]), got["requests"]
    assert (tmp_path / "shot.png").read_bytes()[:4] == b"\x89PNG"
    v = got["values"]
    assert int(v["params-total"]) == inspect_doc["params"]["total"]
    assert int(v["params-active"]) == inspect_doc["params"]["active"]
    assert int(v["num-layers"]) == inspect_doc["architecture"]["num_layers"]
    assert int(v["storage-bytes"]) == inspect_doc["storage"]["bytes"]
    assert int(v["memory-context"]) == memory_doc["context"]
    assert int(v["memory-peak"]) == memory_doc["peak_bytes"]
    assert int(v["memory-cache"]) == memory_doc["cache_bytes"]
    assert int(v["memory-weights"]) == memory_doc["weights_bytes"]
    for kind, value in memory_doc["cache_by_layer_type"].items():
        assert int(v[f"cache-{kind}"]) == value
    assert f"{inspect_doc['params']['total']:,}" in got["text"]
    for f in inspect_doc["features"]:
        assert f["id"] in got["text"]
    return got


def test_demo_report_in_chromium(tmp_path):
    got = check_page(tmp_path, [])
    assert got["statuses"]["adapt-transformers"] == "architecture known but feature missing"


def test_k3_sparse_report_in_chromium(tmp_path, k3_sparse):
    got = check_page(tmp_path, [k3_sparse], context="128k")
    assert int(got["values"]["num-layers"]) == 93


def test_markdown_and_validation(tmp_path, tiny_k3):
    md = tmp_path / "r.md"
    r = run("report", tiny_k3, "--format", "md", "--out", str(md), "--validate")
    assert r.returncode == 0, r.stderr
    text = md.read_text()
    inspect_doc = json.loads(run("inspect", tiny_k3, "--json").stdout)
    assert f"| parameters total | {inspect_doc['params']['total']:,} |" in text
    assert "## Validation" in text and "Status **ran** (every bound tensor loaded and outputs finite; nothing" in text


def test_report_errors_are_one_line(tmp_path):
    r = run("report", str(tmp_path / "missing"))
    assert r.returncode == 2 and r.stderr.startswith("error: ")
    r = run("report", "--format", "pdf", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "html or md" in r.stderr


def test_hostile_names_are_escaped(tmp_path):
    import numpy as np
    from safetensors.numpy import save_file

    folder = tmp_path / "evil"
    folder.mkdir()
    evil = "<script>alert(1)</script>"
    (folder / "config.json").write_text(json.dumps({
        "model_type": evil, "architectures": [evil + "ForCausalLM"], "hidden_size": 8, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 16, "intermediate_size": 16}))
    save_file({"model.embed_tokens.weight": np.zeros((16, 8), np.float32),
               "model.layers.0.self_attn.q_proj.weight": np.zeros((8, 8), np.float32),
               "model.layers.0.self_attn.k_proj.weight": np.zeros((8, 8), np.float32),
               "model.layers.0.self_attn.v_proj.weight": np.zeros((8, 8), np.float32),
               "model.layers.0.self_attn.o_proj.weight": np.zeros((8, 8), np.float32),
               f"model.layers.0.{evil}.weight": np.zeros((8,), np.float32)},
              str(folder / "model.safetensors"))
    for fmt in ("html", "md"):
        out = tmp_path / f"r.{fmt}"
        r = run("report", str(folder), "--format", fmt, "--out", str(out))
        assert r.returncode == 0, r.stderr
        if fmt == "html":
            assert "<script" not in out.read_text().lower()
