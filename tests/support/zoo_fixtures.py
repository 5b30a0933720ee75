"""pytest fixtures over the model zoo (tests/support/zoo.py), registered in tests/conftest.py.

`zoo_root` is a session-wide folder; set ARCHPROBE_ZOO_DIR to reuse a folder built earlier (for instance
by `python -m tests.support.zoo DIR`): members whose content hash matches are not rebuilt.
`zoo` builds every member and twin once per session and maps name -> checkpoint folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def zoo_root(tmp_path_factory) -> Path:
    env = os.environ.get("ARCHPROBE_ZOO_DIR")
    if env:
        root = Path(env)
        root.mkdir(parents=True, exist_ok=True)
        return root
    return tmp_path_factory.mktemp("zoo")


@pytest.fixture(scope="session")
def zoo(zoo_root) -> dict[str, Path]:
    pytest.importorskip("transformers")
    from tests.support.zoo import build_all

    return build_all(zoo_root)

