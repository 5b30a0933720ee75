"""What validate shows of the model's answer: the top-5 next tokens for ours and the reference's, a greedy
continuation through the cached decode path beside transformers' own generate, and a KL computed in
float64 (in float32 the rounding alone gave -5.34e-08 on a real Qwen2.5-0.5B)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
from tests.support import zoo as zoo_mod  # noqa: E402

pytestmark = pytest.mark.needs_transformers

from archprobe.errors import ArchprobeError  # noqa: E402
from archprobe.validate import validate  # noqa: E402
from archprobe.validate.reference import Reference, compare  # noqa: E402


@pytest.mark.parametrize("member", ["llama", "qwen2_moe"])
def test_top_tokens_and_generation_match_the_reference(zoo_root, member):
    doc = validate(str(zoo_mod.build(member, zoo_root)), prompt_ids=list(zoo_mod.PROMPT_IDS),
                   reference="transformers", generate=5)
    assert doc["status"] == "pass"
    ours, theirs = doc["next_tokens"], doc["reference"]["next_tokens"]
    assert len(ours) == 5 and [t["id"] for t in ours] == [t["id"] for t in theirs]
    probs = [t["prob"] for t in ours]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-12
    gen = doc["generation"]
    assert gen["new_tokens"] == 5 and len(gen["ours"]["ids"]) == 5
    assert gen["ours"]["ids"] == gen["reference"]["ids"] and gen["first_difference"] is None
    assert gen["ours"]["ids"][0] == ours[0]["id"]     # the first greedy token is the top next token


def test_generate_is_checked_before_the_run(zoo_root):
    ckpt = str(zoo_mod.build("llama", zoo_root))
    with pytest.raises(ArchprobeError):
        validate(ckpt, prompt_ids=[1, 2], generate=-1)
    with pytest.raises(ArchprobeError):
        validate(ckpt, prompt_ids=[1, 2], generate=2, layers="0-0")


def test_kl_is_float64_and_never_negative_from_rounding():
    """Two float32 logit sets a rounding apart: float32 arithmetic can put their KL below 0; float64 does not."""
    g = torch.Generator().manual_seed(0)
    want = torch.randn(1, 16, 50_000, generator=g) * 8
    got = want + torch.randn(want.shape, generator=g) * 1e-6
    doc = compare(Reference("ref", want, [want, want], {}), got, lambda i: want)
    exact = (torch.log_softmax(want.double(), -1).exp() * (torch.log_softmax(want.double(), -1)
                                                          - torch.log_softmax(got.double(), -1))).sum(-1).mean()
    assert doc["kl"] >= 0 and doc["kl"] == pytest.approx(float(exact), rel=1e-9, abs=1e-18)
