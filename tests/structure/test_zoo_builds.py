"""The model zoo itself is sound: every member's saved checkpoint loads back into its family's model with
no missing, unexpected or reshaped tensor and gives the stored reference logits; every renamed twin holds
exactly the original's tensors under names that share no module-path word with the original's."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from tests.support import zoo as Z  # noqa: E402


@pytest.fixture(scope="module")
def loader():
    import torch
    from transformers import AutoModelForCausalLM

    Z._quiet_transformers()
    torch.set_num_threads(1)

    def load(ckpt):
        try:
            return AutoModelForCausalLM.from_pretrained(str(ckpt), attn_implementation="eager",
                                                        output_loading_info=True, dtype=torch.float32)
        except (ValueError, TypeError):
            return AutoModelForCausalLM.from_pretrained(str(ckpt), output_loading_info=True, dtype=torch.float32)
    return load


def _tensors(ckpt):
    from safetensors import safe_open

    with safe_open(str(ckpt / "model.safetensors"), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


@pytest.mark.parametrize("name", sorted(Z.ALL_MEMBERS))
def test_member_reloads_with_reference_logits(name, zoo, loader):
    import torch

    ckpt = zoo[name]
    cfg = json.loads((ckpt / "config.json").read_text())
    assert cfg["model_type"] == Z.ALL_MEMBERS[name].model_type
    model, info = loader(ckpt)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    ref = Z.load_reference_logits(ckpt)
    assert ref.shape == (len(Z.PROMPT_IDS), cfg.get("vocab_size", 256)) and torch.isfinite(ref).all()
    got = Z.logits_of(model.eval())
    err = (got - ref).abs().max().item() / ref.abs().max().item()
    assert err <= 1e-5, f"{name}: reloaded logits differ, rel max-diff {err:.2e}"
    stored = sum(t.numel() for t in _tensors(ckpt).values())
    assert stored == Z.member_info(zoo[name].parent.parent, name)["params"]


def test_zoo_breadth():
    """The coverage the card and validate issues ask for."""
    tags = [set(m.tags) for m in Z.MEMBERS.values()]          # the card-tested members alone
    families = {m.model_type for m in Z.MEMBERS.values()}
    assert len(families) >= 35
    for tag, least in {"moe": 8, "mla": 4, "hybrid": 8, "mamba": 4, "parallel": 5, "post_norm": 3, "bias": 8,
                       "fused_qkv": 6, "alibi": 3, "sliding": 5, "learned_pos": 4}.items():
        assert sum(tag in t for t in tags) >= least, tag
    assert len(Z.TWINS) >= 6


@pytest.mark.parametrize("name", sorted(Z.TWINS))
def test_twin_same_tensors_renamed(name, zoo):
    import torch
    from transformers import CONFIG_MAPPING

    orig, twin = zoo[name], zoo[Z.twin_name(name)]
    a, b = _tensors(orig), _tensors(twin)
    mapping = json.loads((twin.parent / "rename_map.json").read_text())
    assert set(mapping) == set(a) and set(mapping.values()) == set(b)
    for old, new in mapping.items():
        assert a[old].dtype == b[new].dtype and a[old].shape == b[new].shape
        assert torch.equal(a[old], b[new]), old
        assert not Z.unrenamed_words(old, new), (old, new)
    cfg, tcfg = (json.loads((p / "config.json").read_text()) for p in (orig, twin))
    assert tcfg["model_type"] not in CONFIG_MAPPING and tcfg["architectures"] != cfg["architectures"]
    for key in Z.TWINS[name].drop_keys:
        assert key not in tcfg
    for key in ("hidden_size", "num_attention_heads", "vocab_size", "num_hidden_layers"):
        assert tcfg.get(key) == cfg.get(key)
    assert torch.equal(Z.load_reference_logits(orig), Z.load_reference_logits(twin))


def test_twin_vocabularies_differ():
    """Each twin speaks its own dialect: no two share the word for the layer container and the embedding."""
    seen = {}
    for twin in Z.TWINS.values():
        layers = next(v for k, v in twin.words.items() if k in ("layers", "h", "blocks"))
        key = (layers, twin.words.get("embed_tokens") or twin.words.get("embed_in"))
        assert key not in seen, (twin.of, seen.get(key))
        seen[key] = twin.of


def test_every_causal_lm_family_is_accounted_for():
    """A transformers upgrade that adds a causal-LM family fails here until the zoo takes it or says why not."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    assert set(Z.MEMBERS) | set(Z.FRONTIER) == set(Z.ALL_MEMBERS) and not set(Z.MEMBERS) & set(Z.FRONTIER)
    members = {m.model_type for m in Z.ALL_MEMBERS.values()}
    assert not members & set(Z.SKIPPED)
    missing = set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) - members - set(Z.SKIPPED) - set(Z.NOT_DECODER_ONLY)
    assert not missing, sorted(missing)
