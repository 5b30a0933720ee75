"""config.json as transformers writes it: Infinity / -Infinity / NaN are values, refused only where a
count, width or size must be finite (formats/jsontext.py, structure/config.py)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import assert_bounded, run_cli


@pytest.fixture(scope="module")
def nemotron_h(tmp_path_factory):
    from tests.support.zoo import build

    return build("nemotron_h", tmp_path_factory.mktemp("zoo"))


def _with_config(src, dst, edit) -> str:
    import shutil

    shutil.copytree(src, dst)
    cfg = json.loads((src / "config.json").read_text())
    text = edit(cfg)
    (dst / "config.json").write_text(text)
    return str(dst)


def test_infinity_in_a_value_is_read(nemotron_h, tmp_path):
    """The literal form the hub's Mamba-2 configs carry: `"time_step_limit": [0.0, Infinity]`."""
    def edit(cfg):
        cfg["time_step_limit"] = [0.0, float("inf")]
        cfg["some_floor"] = float("-inf")
        cfg["some_unused"] = float("nan")
        return json.dumps(cfg, indent=2)        # Python writes Infinity / -Infinity / NaN literals

    folder = _with_config(nemotron_h, tmp_path / "ck", edit)
    assert "Infinity" in (tmp_path / "ck" / "config.json").read_text()
    r = run_cli("inspect", folder, "--json")
    assert_bounded(r, ok=True)
    json.loads(r.stdout)                       # still a JSON document
    plain = run_cli("inspect", folder)
    assert_bounded(plain, ok=True)


@pytest.mark.parametrize("key,literal", [("hidden_size", "Infinity"), ("num_hidden_layers", "NaN"),
                                         ("num_attention_heads", "-Infinity"), ("vocab_size", "1e400")])
def test_non_finite_size_is_one_line_naming_the_key(nemotron_h, tmp_path, key, literal):
    def edit(cfg):
        cfg[key] = "@@"
        return json.dumps(cfg, indent=2).replace('"@@"', literal)

    folder = _with_config(nemotron_h, tmp_path / "ck", edit)
    r = run_cli("inspect", folder, "--json")
    assert_bounded(r, ok=False, contains=key)
