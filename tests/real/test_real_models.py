"""Real trained models shipped in PyPI packages (tests/support/real_models.py): inspect, card and memory on
the published GGUF and on the safetensors folder transformers saves; parameter counts equal transformers'."""

from __future__ import annotations

import pytest

from tests.hostile._bounded import assert_bounded, run_cli
from tests.support import real_models

NAMES = real_models.available()
pytestmark = pytest.mark.skipif(not NAMES, reason="no real-model package installed (make install installs them)")


@pytest.fixture(scope="session")
def real_root():
    return real_models.real_root()


@pytest.mark.parametrize("name", NAMES)
def test_safetensors_form_counts_what_transformers_counts(name, real_root):
    pytest.importorskip("transformers")
    from archprobe.structure.inspect import inspect_checkpoint

    folder = real_models.safetensors_dir(name, real_root)
    doc = inspect_checkpoint(str(folder))
    assert doc["params"]["total"] == real_models.transformers_params(folder)
    for cmd in (("card", str(folder)), ("memory", str(folder), "--json")):
        assert_bounded(run_cli(*cmd, timeout=300), ok=True, wall_s=300)


@pytest.mark.parametrize("name", NAMES)
def test_gguf_form_reads(name, real_root):
    pytest.importorskip("transformers")
    from archprobe.structure.inspect import inspect_checkpoint

    gguf = real_models.gguf_path(name, real_root)
    doc = inspect_checkpoint(str(gguf))
    folder = real_models.safetensors_dir(name, real_root)
    assert doc["params"]["total"] == real_models.transformers_params(folder)
    for cmd in (("card", str(gguf)), ("memory", str(gguf), "--json")):
        assert_bounded(run_cli(*cmd, timeout=300), ok=True, wall_s=300)


@pytest.mark.parametrize("name", NAMES)
def test_trained_model_validates_without_a_card(name, real_root):
    """Trained gains averaging ~0 (SmolLM2's layer-0 norm) are not read as (1 + w) for a plain-gain type."""
    pytest.importorskip("transformers")
    folder = real_models.safetensors_dir(name, real_root)
    r = run_cli("validate", str(folder), "--reference", "transformers", timeout=300)
    assert r.rc == 0, r.stderr[-2000:]
    assert "top-1 agreement 100.0%" in " ".join(r.stdout.split())
