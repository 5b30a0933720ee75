"""kinds/ is the one list of mixer and FFN kinds: every kind the card can produce has a label, a colour and
(where it is a mechanism of its own) a feature row, and every mixer kind a zoo member to be checked against;
the terminal, the report and the feature list read labels, colours and ids from it."""

from __future__ import annotations

import re
from pathlib import Path

from archprobe import kinds
from archprobe.structure.card import Ffn, Mixer
from archprobe.structure.features import MIXER_IDS, _mixer_attrs
from tests.support import zoo

SRC = Path(kinds.__file__).parents[1]

# the zoo member that carries each mixer kind (a transformers model, tests/support/zoo.py)
ZOO_MEMBER = {"gqa": "llama", "mha": "gpt2", "mqa": "falcon", "mla": "deepseek_v3", "moa": "jetmoe",
              "kda": "kimi_linear", "gated_deltanet": "qwen3_next", "lightning": "minimax", "mamba2": "bamba",
              "mamba": "mamba", "rg_lru": "recurrent_gemma", "short_conv": "lfm2"}
# kinds no transformers family produces today, each with why
NO_ZOO_MEMBER = {"lowrank_kv": "low-rank K/V without MLA's split: detected from shapes alone, no transformers "
                               "family ships it"}


def produced_kinds() -> set[str]:
    """Every `Mixer("kind"` / `Ffn("kind"` / `kind="..."` the structure package writes: what a card can hold."""
    found = set()
    for path in (SRC / "structure").glob("*.py"):
        text = path.read_text()
        found |= set(re.findall(r"\b(?:Mixer|Ffn)\(\s*(?:kind=)?\"([a-z0-9_]+)\"", text))
        found |= set(re.findall(r"\b(?:mixer|ffn|m|f)\.kind\s*=\s*\"([a-z0-9_]+)\"", text))
    return found


def test_every_kind_the_card_can_produce_is_in_the_registry():
    produced = produced_kinds()
    assert {"kda", "mla", "moa", "mamba2", "dense", "moe"} <= produced, produced   # the scan itself works
    missing = produced - set(kinds.ALL)
    assert not missing, f"kinds the card produces but kinds/ lacks: {sorted(missing)}"


def test_every_kind_has_a_label_a_colour_and_a_feature_row():
    for k in kinds.ALL.values():
        assert k.label and k.label != k.name or k.name == "dense", k
        assert re.fullmatch(r"#[0-9a-f]{6}", k.colour), k
    for name, k in {**kinds.MIXERS, **{n: f for n, f in kinds.FFNS.items() if n != "dense"}}.items():
        assert k.feature and re.fullmatch(r"[a-z_]+\.[a-z0-9_]+", k.feature), name
    assert len(kinds.MIXERS) == 13
    assert len({k.colour for k in kinds.MIXERS.values()}) == 13, "two mixer kinds share a colour"


def test_mixer_attrs_and_feature_ids_come_from_the_registry():
    assert MIXER_IDS == {n: k.feature for n, k in kinds.MIXERS.items()}
    assert MIXER_IDS["moa"] == "attention.moa"
    moa = Mixer("moa", num_heads=4, num_kv_heads=2, head_dim=16, num_experts=8, top_k=2)
    assert _mixer_attrs(moa, 64) == {"num_experts": 8, "top_k": 2, "num_heads": 4, "num_kv_heads": 2,
                                     "head_dim": 16}
    assert Ffn().kind in kinds.ALL and Mixer().kind in kinds.ALL


def test_every_mixer_kind_has_a_zoo_member():
    assert set(ZOO_MEMBER) | set(NO_ZOO_MEMBER) == set(kinds.MIXERS)
    assert not set(ZOO_MEMBER) & set(NO_ZOO_MEMBER)
    absent = {kind: name for kind, name in ZOO_MEMBER.items() if name not in zoo.ALL_MEMBERS}
    assert not absent, absent


def test_terminal_and_report_label_and_colour_every_mixer_kind():
    from archprobe.cli.render import compress_runs
    from archprobe.report.svg import color, legend

    for name, k in kinds.MIXERS.items():
        assert kinds.label(name) == k.label and color(name) == k.colour
        assert k.colour in legend([name])
    assert compress_runs([kinds.label("moa")] * 2) == "MoA×2"
    assert kinds.label("no_such_kind") == "no_such_kind"
