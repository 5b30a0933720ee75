"""Renamed twins of transformers-saved tiny models: every tensor's path words replaced by nonsense words and
model_type unknown, the config's numbers kept. The card must equal the original's modulo names: every field
of every part, and every role bound to the renamed copy of the same tensor. The words of same-shaped
tensors that only a name can order (q/k/v of equal widths and their convs, q/k norms, gate/up) are kept for
the binding check; the field check renames them too (a swapped q/k changes no field). A field the original
took from its family's row (origin `default`: Llama's plain `w` norm gains, Mixtral's renormalised top-k) is
family knowledge that an unknown model_type cannot have: the twin leaves it unknown (validate then assumes
or asks), never guesses it differently."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers


from archprobe.formats.sources import open_source  # noqa: E402
from archprobe.structure.inspect import build_card  # noqa: E402
from tests.support.nonsense_names import TIES, without_evidence, write_renamed_twin  # noqa: E402
from tests.support.zoo import build  # noqa: E402

FAMILIES = ["llama", "mixtral", "qwen3_moe", "deepseek_v3", "kimi_linear", "qwen3_next"]
PARTS = ("embed", "rope", "final_norm", "head", "layers", "tie_word_embeddings", "vocab_size", "num_layers")


def _card(folder) -> dict:
    return build_card(open_source(str(folder))).card.to_dict()


def _at(card: dict, path: str):
    """The dict holding the card field at a dotted origins path, and the field's key."""
    *heads, leaf = path.split(".")
    node = card
    for h in heads:
        node = node[int(h)] if isinstance(node, list) else node[h]
    return node, leaf


@pytest.mark.parametrize("family", FAMILIES)
def test_renamed_twin_gets_the_same_card(family, zoo_root, tmp_path):
    src = build(family, zoo_root)
    want = _card(src)
    full = tmp_path / "full"
    write_renamed_twin(src, full, keep=frozenset())
    got = _card(full)
    assert got["unexplained"] == [] and want["unexplained"] == []
    for path in [p for p, origin in want["origins"].items() if origin == "default"]:
        node_w, leaf = _at(want, path)
        node_g, _ = _at(got, path)
        assert node_g[leaf] in (None, node_w[leaf]), path
        node_w[leaf] = node_g[leaf] = None
    for part in PARTS:
        assert without_evidence(got[part]) == without_evidence(want[part]), part


@pytest.mark.parametrize("family", FAMILIES)
def test_renamed_twin_binds_every_role_to_the_same_tensor(family, zoo_root, tmp_path):
    src = build(family, zoo_root)
    rename = write_renamed_twin(src, tmp_path / "tied", keep=TIES)
    want, got = _card(src)["tensors"], _card(tmp_path / "tied")["tensors"]
    assert {role: rename(name) for role, name in want.items()} == got
    shutil.rmtree(tmp_path / "tied")
