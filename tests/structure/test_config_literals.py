"""config.json as transformers writes it: `Infinity`, `-Infinity` and `NaN` are values (every Mamba-2 family
config it saves carries `"time_step_limit": [0.0, Infinity]`), refused only where a count, width or size
must be finite, with the key named."""

from __future__ import annotations

import json

import pytest

from archprobe.errors import ArchprobeError
from archprobe.structure.inspect import inspect_checkpoint
from tests.support.cli import assert_bounded, run_cli
from tests.support.header_checkpoints import write_llama


def _with_literals(folder, extra: str) -> str:
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    text = json.dumps(cfg)[:-1] + ", " + extra + "}"
    path.write_text(text)
    return str(folder)


def test_literals_in_values_are_read_and_the_json_out_is_strict(tmp_path):
    (tmp_path / "plain").mkdir()
    base = inspect_checkpoint(write_llama(tmp_path / "plain", {}))
    write_llama(tmp_path, {})
    folder = _with_literals(tmp_path, '"time_step_limit": [0.0, Infinity], "floor": -Infinity, "unused": NaN')
    assert "Infinity" in (tmp_path / "config.json").read_text()
    doc = inspect_checkpoint(folder)
    assert doc["params"] == base["params"] and doc["layers"] == base["layers"]
    r = run_cli("inspect", folder, "--json")
    assert_bounded(r, ok=True)
    json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} in --json output"))


@pytest.mark.parametrize("key,literal", [("hidden_size", "Infinity"), ("num_hidden_layers", "NaN"),
                                         ("num_attention_heads", "-Infinity"), ("vocab_size", "1e400"),
                                         ("rms_norm_eps", "NaN"), ("rope_theta", "Infinity")])
def test_a_non_finite_size_is_one_line_naming_the_key(tmp_path, key, literal):
    write_llama(tmp_path, {})
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg[key] = "@@"
    (tmp_path / "config.json").write_text(json.dumps(cfg).replace('"@@"', literal))
    with pytest.raises(ArchprobeError, match=key):
        inspect_checkpoint(str(tmp_path))
    assert_bounded(run_cli("inspect", str(tmp_path), "--json"), ok=False, contains=key)


def test_other_json_from_outside_still_refuses_the_literals(tmp_path):
    """Only config.json takes them: an index or a validate document with NaN stays refused."""
    from archprobe.errors import CheckpointError
    from archprobe.formats.jsontext import load_strict

    with pytest.raises(CheckpointError, match="not a JSON number"):
        load_strict(b'{"metadata": {"total_size": NaN}}', "x", "the index")
