"""Shard sets of any digit width, as published: the index is not read when the files name a complete set."""

from __future__ import annotations

import os

import pytest

from archprobe.formats.checkpoint import numbered_shards
from archprobe.writers.synthetic import K3_SHARD_NAME, K3Dims, write_k3_checkpoint
from tests.support.hub_server import HubServer

SMALL = K3Dims(num_layers=8, hidden=256, vocab=1024, heads=4, head_dim=32, rope_dim=16, q_lora=64, kv_lora=32,
               decay_rank=32, a_log_len=8, experts=32, top_k=4, expert_width=64, latent=128, dense_width=512,
               block_size=4, vision_blocks=1, vision_hidden=64)
INDEX = "model.safetensors.index.json"


@pytest.mark.parametrize("fmt,n", [("model-{no:05d}-of-{count:05d}.safetensors", 3),
                                   ("model-{no:05d}-of-{count:06d}.safetensors", 96),   # Kimi K3
                                   ("model-{no}-of-{count}.safetensors", 61),           # Kimi K2
                                   ("weights-{no:03d}-of-{count:03d}.safetensors", 12)])
def test_complete_sets_of_any_width(fmt, n):
    names = [fmt.format(no=i, count=n) for i in range(n, 0, -1)]
    assert numbered_shards(names + ["config.json"]) == names[::-1]


@pytest.mark.parametrize("names", [
    ["model-1-of-3.safetensors", "model-2-of-3.safetensors"],                                # one missing
    ["model-1-of-2.safetensors", "model-01-of-2.safetensors", "model-2-of-2.safetensors"],   # 1 twice
    ["model-0-of-2.safetensors", "model-1-of-2.safetensors"],                                # from 0
    ["a-1-of-1.safetensors", "b-1-of-1.safetensors"],                                        # two sets
    ["model-1-of-0.safetensors"], ["sub/model-1-of-1.safetensors"],
])
def test_incomplete_or_ambiguous_sets_are_not_sets(names):
    assert numbered_shards(names) is None


@pytest.fixture(scope="module")
def k3_published(tmp_path_factory):
    folder = tmp_path_factory.mktemp("k3names")
    write_k3_checkpoint(folder, SMALL, shards=8, sparse=True, shard_name=K3_SHARD_NAME)
    assert os.path.exists(folder / "model-00001-of-000008.safetensors")
    assert os.path.exists(folder / INDEX)
    return folder


def test_k3_published_names_over_the_hub_never_request_the_index(k3_published, monkeypatch):
    from archprobe.structure.inspect import inspect_checkpoint

    with HubServer() as server:
        server.add_repo("moonshotai/k3-names", str(k3_published))
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        doc = inspect_checkpoint("moonshotai/k3-names")
        paths = [p for _, p, _ in server.served]
    local = inspect_checkpoint(str(k3_published))
    assert not any(p.endswith(INDEX) for p in paths), paths
    assert sum(p.endswith(".safetensors") for p in paths) >= 8
    assert doc["params"] == local["params"]


def test_k3_published_names_locally_do_not_read_the_index(k3_published, tmp_path):
    """A corrupt index beside a complete set is not read (it would be refused if it were)."""
    from archprobe.structure.inspect import inspect_checkpoint

    folder = tmp_path / "k3"
    folder.mkdir()
    for f in os.listdir(k3_published):
        os.link(k3_published / f, folder / f) if f != INDEX else (folder / f).write_text("{not json")
    doc = inspect_checkpoint(str(folder))
    assert doc["params"] == inspect_checkpoint(str(k3_published))["params"]
