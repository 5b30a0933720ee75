"""Shared fixtures: tiny checkpoints are built in the test, never downloaded."""

from __future__ import annotations

import pytest

from archprobe.writers.synthetic import K3_SHARD_NAME, K3Dims, tiny_k3_dims, write_k3_checkpoint
from tests.support.zoo_fixtures import zoo, zoo_root  # noqa: F401  (session fixtures over the model zoo)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test session writes the demo checkpoint into its own cache, never the user's."""
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    # adapt reads the package index and the forge by default: a test that names no stand-in meets a closed
    # port at once (the offline path), never the public services
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9")


@pytest.fixture(scope="session")
def k3_sparse(tmp_path_factory):
    """The full K3 inventory (96 shards, 497,220 tensors, 1.45 TB apparent) as sparse files, under the
    shard names K3 is published with (`model-00001-of-000096.safetensors`)."""
    folder = tmp_path_factory.mktemp("k3-sparse")
    write_k3_checkpoint(folder, K3Dims(), shards=96, sparse=True, shard_name=K3_SHARD_NAME)
    return str(folder)


@pytest.fixture(scope="session")
def tiny_k3(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-k3")
    write_k3_checkpoint(folder, tiny_k3_dims(), shards=2, sparse=False)
    return str(folder)

