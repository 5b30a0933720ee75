"""Nothing false on clean models: random-weight transformers models of several MoE families (their own
routers, biases and shared experts) and a dense one observed without a single warning."""

import pytest

from archprobe.observe import observe

pytest.importorskip("transformers")


@pytest.mark.parametrize("name", ["llama", "mixtral", "qwen2_moe", "deepseek_v3", "kimi_linear", "qwen3_moe",
                                  "glm4_moe", "ernie4_5_moe", "deepseek_v32"])
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
    if name == "deepseek_v32":       # DSA indexer on MLA: the share of causal KV entries it keeps
        assert doc["gates"] and all(g["kind"] == "indexer" and 0 < g["share_kept"] <= 1 for g in doc["gates"])
    if name in ("deepseek_v3", "deepseek_v32", "kimi_linear"):
        assert doc["mla"] and all(1 <= m["rank_99"] <= m["rank"] for m in doc["mla"])
