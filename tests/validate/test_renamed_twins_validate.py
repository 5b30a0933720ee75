"""validate on renamed twins (tests/structure/test_renamed_twins.py): every path word nonsense except the tie
words only names can order, model_type unknown. The twin computes the original's transformers logits at the
fp32 gate; a field only the family row gave (Mixtral's renormalised top-k) is asked for by name, not guessed."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from safetensors.torch import load_file  # noqa: E402

from archprobe.validate import validate  # noqa: E402
from tests.support import zoo  # noqa: E402
from tests.support.nonsense_names import TIES, write_renamed_twin  # noqa: E402


@pytest.mark.parametrize("family", ["llama", "qwen3_moe", "deepseek_v3", "kimi_linear", "qwen3_next"])
def test_twin_computes_the_original_logits(family, zoo_root, tmp_path):
    src = zoo.build(family, zoo_root)
    write_renamed_twin(src, tmp_path / "twin", keep=TIES)
    out = tmp_path / "logits.safetensors"
    doc = validate(str(tmp_path / "twin"), prompt_ids=zoo.PROMPT_IDS, save_logits=str(out))
    assert doc["status"] == "ran" and doc["unmapped_tensors"] == [] and doc["missing_tensors"] == [], doc
    want = zoo.load_reference_logits(src)
    got = load_file(str(out))["logits"].reshape(want.shape)
    assert ((got - want).abs().max() / want.abs().max()).item() <= 1e-4


def test_mixtral_twin_asks_for_the_routing_field(zoo_root, tmp_path):
    from archprobe.errors import ArchprobeError

    write_renamed_twin(zoo.build("mixtral", zoo_root), tmp_path / "twin", keep=TIES)
    with pytest.raises(ArchprobeError, match=r"layers\.0\.ffn\.router\.renormalize"):
        validate(str(tmp_path / "twin"), prompt_ids=zoo.PROMPT_IDS)
