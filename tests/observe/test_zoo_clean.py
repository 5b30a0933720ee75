"""Nothing false on clean models: random-weight transformers models of several MoE families (their own
routers, biases and shared experts) and a dense one observed without a single warning."""

import pytest

from archprobe.observe import observe

pytest.importorskip("transformers")


@pytest.mark.parametrize("name", ["llama", "mixtral", "qwen2_moe", "deepseek_v3", "kimi_linear"])
def test_no_false_findings(name, tmp_path_factory):
    from tests.support.zoo import build

    doc = observe(str(build(name, tmp_path_factory.mktemp("zoo"))))
    assert doc["forward"]["status"] == "ran"
    assert doc["warnings"] == []
    assert doc["weights"]["nonfinite"] == [] and doc["weights"]["duplicates"] == [] and doc["weights"]["outliers"] == []
    for r in doc["routing"]:
        assert r["dead"] == [] and sum(r["load"]) == doc["tokens"] * r["top_k"]
    if name == "kimi_linear":
        assert doc["horizons"] and all(h["tokens"] is None or h["tokens"] > 0 for h in doc["horizons"])
