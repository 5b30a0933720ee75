"""Real trained models shipped in PyPI packages (tests/support/real_models.py): inspect, card and memory on
the published GGUF and on the safetensors folder transformers saves; parameter counts equal transformers';
validate of the safetensors form at the fp32 gate with no --card, its top-5 next tokens and a greedy
continuation equal to transformers'. Trained gains are not ones: a value-reading heuristic that only random
weights satisfy fails here (SmolLM2-135M's layer-0 input norm averages +0.001; validate used to refuse it)."""

from __future__ import annotations

import json

import pytest

from tests.support import real_models
from tests.support.cli import assert_bounded, run_cli

NAMES = real_models.available()


def test_the_packaged_models_are_there_where_required():
    """No model installed leaves the tests below without parameters: in CI (ARCHPROBE_REQUIRE_REAL_MODELS=1)
    that is a failure, never a silent pass."""
    for name in real_models.MODELS:
        real_models.require(name)


@pytest.fixture(scope="session")
def real_root():
    return real_models.real_root()


@pytest.mark.parametrize("form", ["safetensors", "gguf"])
@pytest.mark.parametrize("name", NAMES)
def test_each_form_counts_what_transformers_counts(name, form, real_root):
    pytest.importorskip("transformers")
    from archprobe.structure.inspect import inspect_checkpoint

    folder = real_models.safetensors_dir(name, real_root)
    source = str(folder if form == "safetensors" else real_models.gguf_path(name, real_root))
    assert inspect_checkpoint(source)["params"]["total"] == real_models.transformers_params(folder)
    for cmd in (("card", source), ("memory", source, "--json")):
        assert_bounded(run_cli(*cmd, timeout=300), ok=True, wall_s=300)


@pytest.mark.parametrize("name", NAMES)
def test_validate_matches_transformers_at_the_fp32_gate_without_a_card(name, real_root):
    """The gate (computed in float64), the top-5 next tokens and a greedy continuation (ours through the
    cached decode path) against transformers'."""
    pytest.importorskip("transformers")
    folder = real_models.safetensors_dir(name, real_root)
    r = run_cli("validate", str(folder), "--reference", "transformers", "--prompt", "The capital of France is",
                "--generate", "6", "--json", timeout=300)
    assert r.rc == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    ref = doc["reference"]
    assert doc["status"] == "pass", doc.get("reasons")
    assert ref["max_abs_diff"] / ref["logit_scale"] <= 1e-4
    assert 0.0 <= ref["kl"] <= 1e-6
    assert ref["top1_agreement"] == 1.0
    ours, theirs = doc["next_tokens"], ref["next_tokens"]
    assert len(ours) == 5 and [t["id"] for t in ours] == [t["id"] for t in theirs]
    assert all(t["token"] for t in ours)
    for a, b in zip(ours, theirs, strict=True):
        assert abs(a["prob"] - b["prob"]) <= 1e-4
    gen = doc["generation"]
    assert len(gen["ours"]["ids"]) == 6 and gen["ours"]["ids"] == gen["reference"]["ids"]
    assert gen["first_difference"] is None and gen["ours"]["text"] == gen["reference"]["text"]
