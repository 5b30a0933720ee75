"""Every row of the plain-gain table holds in the installed transformers: the modeling file it names exists
and applies no `1 + weight`; every `norm_offset` family's file does apply one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

from archprobe.structure.family_defaults import FAMILY_DEFAULTS  # noqa: E402
from archprobe.structure.norm_convention import PLAIN_GAINS  # noqa: E402

ROOT = Path(transformers.__file__).parent.parent
OFFSET = re.compile(r"1(\.0)? \+ self\.weight|self\.weight \+ 1")


def _file(source: str) -> Path:
    return ROOT / source.split(" ", 1)[0]


@pytest.mark.parametrize("model_type", sorted(PLAIN_GAINS))
def test_plain_row_names_a_file_without_an_offset(model_type):
    path = _file(PLAIN_GAINS[model_type])
    assert path.is_file(), path
    assert not OFFSET.search(path.read_text()), path
    assert model_type not in FAMILY_DEFAULTS or not FAMILY_DEFAULTS[model_type].get("norm_offset")


def test_offset_families_apply_one_plus_w():
    for model_type in ("gemma", "gemma2", "qwen3_next"):
        assert FAMILY_DEFAULTS[model_type]["norm_offset"]
        path = ROOT / f"transformers/models/{model_type}/modeling_{model_type}.py"
        assert OFFSET.search(path.read_text()), path
