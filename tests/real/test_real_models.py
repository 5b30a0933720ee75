"""Real trained models shipped in PyPI packages (tests/support/real_models.py): inspect, card and memory on
the published GGUF and on the safetensors folder transformers saves; parameter counts equal transformers'."""

from __future__ import annotations

import pytest

from tests.support import real_models
from tests.support.cli import assert_bounded, run_cli

NAMES = real_models.available()


def test_the_packaged_models_are_there_where_required():
    """The skip above must not hide a broken install in CI (ARCHPROBE_REQUIRE_REAL_MODELS=1)."""
    for name in real_models.MODELS:
        real_models.require(name)


@pytest.fixture(scope="session")
def real_root():
    return real_models.real_root()


@pytest.mark.parametrize("form", ["safetensors", "gguf"])
@pytest.mark.parametrize("name", NAMES)
def test_each_form_counts_what_transformers_counts(name, form, real_root):
    pytest.importorskip("transformers")
    from archprobe.structure.inspect import inspect_checkpoint

    folder = real_models.safetensors_dir(name, real_root)
    source = str(folder if form == "safetensors" else real_models.gguf_path(name, real_root))
    assert inspect_checkpoint(source)["params"]["total"] == real_models.transformers_params(folder)
    for cmd in (("card", source), ("memory", source, "--json")):
        assert_bounded(run_cli(*cmd, timeout=300), ok=True, wall_s=300)


@pytest.mark.parametrize("name", NAMES)
def test_trained_model_validates_without_a_card(name, real_root):
    """Trained gains averaging ~0 (SmolLM2's layer-0 norm) are not read as (1 + w) for a plain-gain type."""
    pytest.importorskip("transformers")
    folder = real_models.safetensors_dir(name, real_root)
    r = run_cli("validate", str(folder), "--reference", "transformers", timeout=300)
    assert r.rc == 0, r.stderr[-2000:]
    assert "top-1 agreement 100.0%" in " ".join(r.stdout.split())
