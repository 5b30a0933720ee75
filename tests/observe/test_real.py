"""observe on a real trained model (SmolLM2-135M, tests/support/real_models.py), as its published GGUF file
read directly and as the safetensors folder transformers saves from it: the forward runs, every stored tensor
is scanned while the forward reads it, nothing false is reported on trained weights (no NaN, no duplicates, no
outliers, no warnings), and the massive activations the issue quotes (|x| about 2.2e4 from layer 11 on) are
named as a note."""

from __future__ import annotations

import pytest

from archprobe.observe import observe
from tests.support import real_models

NAME = "smollm2-135m"
IDS = [504, 3458, 282, 4649, 314, 7042, 30, 378, 3938, 288, 5248, 282, 1032, 30, 1431, 253,
       1485, 3938, 28, 2116, 7042, 1079, 20, 5248, 12, 30, 5]


@pytest.fixture(scope="module")
def forms():
    real_models.require(NAME)        # fails where the real models are required, skips elsewhere
    root = real_models.real_root()
    out = {"gguf": str(real_models.gguf_path(NAME, root))}
    try:
        import transformers  # noqa: F401
        out["safetensors"] = str(real_models.safetensors_dir(NAME, root))
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("form", ["gguf", "safetensors"])
def test_real_model_observed_without_false_findings(forms, form):
    if form not in forms:
        pytest.skip("transformers is needed to write the safetensors form")
    doc = observe(forms[form], prompt_ids=IDS)
    assert doc["forward"]["status"] == "ran" and doc["forward"]["layers_run"] == 30
    w = doc["weights"]
    assert w["tensors"] > 0 and w["read_during_forward"] == w["tensors"]
    assert w["nonfinite"] == [] and w["duplicates"] == [] and w["outliers"] == []
    assert w["duplicate_layers"] == [] and w["duplicate_experts"] == []
    assert doc["warnings"] == []
    massive = [d["layer"] for d in doc["depth"] if d["massive"]["massive"]]
    assert massive and min(massive) >= 2
    assert max(d["massive"]["max_abs"] for d in doc["depth"]) > 1e4
    assert any(f["message"].startswith("massive activations") for f in doc["findings"])
