"""`archprobe diff --forward`: both sides on one prompt, per-layer hidden states and llama.cpp's KLD statistics.

The statistics are recomputed here from two logit sets with numpy, after llama.cpp's perplexity.cpp
definitions (KLD with A as the base, percentiles linear at fraction * (n - 1), delta-p of the next prompt token,
argmax agreement): against a copy quantized to Q4_0 by the gguf package, from transformers' logits of both
folders and from validate's saved logits of two GGUF files. A real GGUF model against its own dequantized
safetensors form gives KLD ~ 0; sources of different architectures are compared as far as they match."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from archprobe.diff.compare import add_weight_sections
from archprobe.diff.data import open_weights
from archprobe.diff.forward import forward_diff
from archprobe.diff.headers import diff_sources
from tests.support.cli import invoke
from tests.support.diff_pairs import quantized, rewrite, tiny_llama

IDS = [int(x) for x in np.random.default_rng(5).integers(3, 256, 40)]


def expected_stats(base: np.ndarray, other: np.ndarray, ids: list[int]) -> dict:
    """llama-perplexity --kl-divergence's figures from two [T, V] logit arrays, written out independently."""
    n = len(ids) - 1
    def log_softmax(x):
        x = x.astype(np.float64)[:n]
        m = x.max(-1, keepdims=True)
        return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))
    lp, lq = log_softmax(base), log_softmax(other)
    kld = (np.exp(lp) * (lp - lq)).sum(-1)
    rows = np.arange(n)
    dp = np.exp(lq[rows, ids[1:]]) - np.exp(lp[rows, ids[1:]])
    return {"mean_kld": kld.mean(), "kld_99": np.percentile(kld, 99.0), "kld_99_9": np.percentile(kld, 99.9),
            "max_kld": kld.max(), "rms_delta_p": np.sqrt((dp ** 2).mean()),
            "same_top_p": (lp.argmax(-1) == lq.argmax(-1)).mean()}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A tiny llama and its copy with every layer matrix rounded through Q4_0 by the gguf package."""
    from gguf import GGMLQuantizationType as Q

    root = tmp_path_factory.mktemp("fwd")
    a = tiny_llama(root / "a", layers=3)
    b = rewrite(a, root / "q4", lambda n, t: quantized(t, Q.Q4_0) if t.ndim == 2 and ".layers." in n else t)
    return a, b


def _hf_logits(folder: str, ids: list[int]) -> np.ndarray:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()


def test_q4_0_copy_statistics_equal_those_from_transformers_logits(pair):
    a, b = pair
    fwd = forward_diff(open_weights(a), open_weights(b), IDS, {"source": "ids"})
    want = expected_stats(_hf_logits(a, IDS), _hf_logits(b, IDS), IDS)
    got = fwd["logits"]
    assert got["positions"] == len(IDS) - 1 and not fwd["errors"]
    assert want["mean_kld"] > 1e-5          # Q4_0 changes the model measurably
    for k in ("mean_kld", "kld_99", "kld_99_9", "max_kld", "rms_delta_p"):
        assert got[k] == pytest.approx(want[k], rel=1e-3), k   # our forward vs transformers': fp32 noise only
    assert got["same_top_p"] == want["same_top_p"]
    assert [r["layer"] for r in fwd["layers"]] == [0, 1, 2] and all(r["compared"] for r in fwd["layers"])
    assert all(r["rel_rms"] > 0 and r["cosine"] < 1 for r in fwd["layers"])


def test_gguf_q4_0_copy_statistics_equal_those_from_the_saved_logits(tmp_path):
    from gguf import GGMLQuantizationType as Q
    from safetensors.torch import load_file

    from archprobe.validate import validate
    from tests.support.gguf_files import write_tiny_gguf

    a, b = tmp_path / "f32.gguf", tmp_path / "q4_0.gguf"
    write_tiny_gguf(a, quant=Q.F32, rope_theta=10000.0)     # the same seeded weights, as F32 and as Q4_0
    write_tiny_gguf(b, quant=Q.Q4_0, rope_theta=10000.0)
    fwd = forward_diff(open_weights(str(a)), open_weights(str(b)), IDS[:24], {"source": "ids"})
    assert not fwd["errors"], fwd["errors"]
    logits = []
    for path in (a, b):
        out = tmp_path / f"{path.stem}.safetensors"
        validate(str(path), IDS[:24], save_logits=str(out))
        logits.append(load_file(str(out))["logits"][0].double().numpy())
    want = expected_stats(*logits, IDS[:24])
    for k, v in want.items():
        assert fwd["logits"][k] == pytest.approx(v, rel=1e-9, abs=1e-15), k
    assert want["mean_kld"] > 1e-4


def test_a_real_gguf_against_its_dequantized_safetensors_form_has_kld_about_zero():
    from tests.support import real_models

    gguf = real_models.smollm2_gguf()
    hf = str(real_models.safetensors_dir("smollm2-135m", real_models.real_root()))
    fwd = forward_diff(open_weights(gguf), open_weights(hf), IDS[:12], {"source": "ids"})
    assert not fwd["errors"], fwd["errors"]
    lg = fwd["logits"]
    assert lg["mean_kld"] < 1e-7 and lg["max_kld"] < 1e-6 and lg["same_top_p"] == 1.0, lg
    assert lg["rms_delta_p"] < 1e-4
    assert len(fwd["layers"]) == 30 and max(r["rel_rms"] for r in fwd["layers"]) < 1e-4


def test_different_architectures_are_compared_as_far_as_they_match(pair, tmp_path):
    a, _ = pair
    short = tiny_llama(tmp_path / "short", layers=2, seed=4)
    doc = diff_sources(a, short)
    add_weight_sections(doc, a, short, data=False, forward=True, ids=IDS[:10])
    rows = doc["forward"]["layers"]
    assert [r["compared"] for r in rows] == [True, True, False] and rows[2]["why"] == "only A has it"
    assert doc["forward"]["logits"]["positions"] == 9     # same vocabulary: the logits are compared
    wide = tiny_llama(tmp_path / "wide", layers=2, hidden=128, inter=128, seed=4)
    fwd = forward_diff(open_weights(a), open_weights(wide), IDS[:10], {"source": "ids"})
    assert all(not r["compared"] and "widths differ" in r.get("why", "") for r in fwd["layers"][:2])


def test_cli_forward_json_text_and_bad_input(pair, tmp_path):
    a, b = pair
    r = invoke("diff", a, b, "--forward", "--prompt-ids", ",".join(map(str, IDS[:16])), "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["summary"]["mean_kld"] == doc["forward"]["logits"]["mean_kld"] > 0
    r = invoke("diff", a, b, "--forward", "--data")
    assert r.exit_code == 0 and "Mean KLD" in r.stdout and "Same top p" in r.stdout and "Per layer" in r.stdout
    for args in (["--prompt", "hi"], ["--forward", "--prompt", "x", "--prompt-ids", "1,2"],
                 ["--forward", "--prompt-file", str(tmp_path / "missing.txt")],
                 ["--forward", "--prompt", "no tokenizer here"]):
        r = invoke("diff", a, b, *args)
        assert r.exit_code == 2 and "Traceback" not in r.output, (args, r.output)


def test_a_side_that_cannot_run_is_reported_not_raised(tmp_path):
    from tests.support.gguf_files import write_tiny_gguf

    a, b = tmp_path / "no-rope.gguf", tmp_path / "rope.gguf"
    write_tiny_gguf(a)                        # no rope base: the card leaves rope.theta unknown
    write_tiny_gguf(b, rope_theta=10000.0)
    fwd = forward_diff(open_weights(str(a)), open_weights(str(b)), IDS[:8], {"source": "ids"})
    assert "rope.theta" in fwd["errors"]["a"] and "b" not in fwd["errors"]
    assert fwd["logits"] == {"error": "not every layer ran on A"}
    assert all(not r["compared"] and r["why"] == "only B has it" for r in fwd["layers"])


def _word_tokenizer(folder, words: list[str]) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i + 3 for i, w in enumerate(words)} | {"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(f"{folder}/tokenizer.json")


def test_prompt_text_is_tokenized_by_a_and_checked_against_b(pair, tmp_path):
    import shutil

    a, b = (str(shutil.copytree(p, tmp_path / name)) for p, name in zip(pair, ("a", "b"), strict=True))
    words = ["the", "cat", "sat", "on", "mat"]
    _word_tokenizer(a, words)
    _word_tokenizer(b, words)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("the cat sat\n\non the mat")
    r = invoke("diff", a, b, "--forward", "--prompt-file", str(prompt), "--json")
    assert r.exit_code == 0, r.output
    fwd = json.loads(r.stdout)["forward"]
    assert fwd["tokens"] == 6 and fwd["prompt"] == {"source": "A's tokenizer", "tokenizers_agree": True}
    _word_tokenizer(b, list(reversed(words)))          # B numbers the same words otherwise
    r = invoke("diff", a, b, "--forward", "--prompt", "the cat sat", "--json")
    assert json.loads(r.stdout)["forward"]["prompt"]["tokenizers_agree"] is False
