"""`report --diff B [--diff-data] [--diff-forward]`: the diff section of the self-contained page carries the
per-layer error strip and the logit comparison with the same figures `diff --json` gives."""

from __future__ import annotations

import json
import re

import torch

from tests.support.cli import invoke
from tests.support.diff_pairs import rewrite, tiny_llama


def test_report_diff_page_has_the_error_strip_and_the_logit_figures(tmp_path):
    a = tiny_llama(tmp_path / "a", layers=3)
    g = torch.Generator().manual_seed(2)
    b = rewrite(a, tmp_path / "b", lambda n, t: t + 0.2 * t.std() * torch.randn(t.shape, generator=g)
                if ".layers.1." in n and t.ndim == 2 else t)     # layer 1's matrices: 20% noise
    page = tmp_path / "r.html"
    r = invoke("report", a, "--diff", b, "--diff-data", "--diff-forward", "--out", str(page), "--no-progress")
    assert r.exit_code == 0, r.output
    html = page.read_text()
    want = json.loads(invoke("diff", a, b, "--data", "--forward", "--json").stdout)
    assert "<section id=diff>" in html and "<a href='#diff'>diff</a>" in html
    assert "<script" not in html and not re.search(r"(src|href)=['\"]?https?:", html)
    for i, row in enumerate(want["data"]["layers"][:3]):
        cell = re.search(rf"<rect id='diff-weights-{i}'[^>]*>", html).group(0)
        assert f"data-value='{row['rel_error']}'" in cell
        assert ("stroke='#000'" in cell) == (str(i) in want["data"]["flagged_layers"])
    assert want["data"]["flagged_layers"] == ["1"]
    for i, row in enumerate(want["forward"]["layers"]):
        assert f"id='diff-hidden-{i}'" in html and f"data-value='{row['rel_rms']}'" in html
    kld = want["forward"]["logits"]["mean_kld"]
    assert kld > 0 and f"id='diff-mean-kld' data-value='{kld}'" in html
    assert "Same top p" in html
    md = tmp_path / "r.md"
    r = invoke("report", a, "--diff", b, "--diff-data", "--diff-forward", "--format", "md",
               "--out", str(md), "--no-progress")
    assert r.exit_code == 0 and "## Diff" in md.read_text() and "flagged layers 1." in md.read_text()


def test_report_diff_options_need_diff(tmp_path):
    a = tiny_llama(tmp_path / "a", layers=1)
    for args in (["--diff-data"], ["--diff", a, "--diff-prompt", "x"]):
        r = invoke("report", a, "--out", str(tmp_path / "r.html"), *args)
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    r = invoke("report", a, "--diff", a, "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 0 and "no differences" in (tmp_path / "r.html").read_text()
