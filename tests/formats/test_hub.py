"""Remote inspection against a hub stand-in on 127.0.0.1 (HF_ENDPOINT): only header bytes move,
shards are fetched in parallel, 429/5xx are retried, 404 and gated repos give one clear message."""

from __future__ import annotations

import os

import pytest

from archprobe.errors import SourceError
from archprobe.structure.inspect import inspect_checkpoint
from archprobe.writers.synthetic import K3Dims, write_k3_checkpoint
from tests.support.hub_server import HubServer

SMALL = K3Dims(num_layers=8, hidden=256, vocab=1024, heads=4, head_dim=32, rope_dim=16, q_lora=64, kv_lora=32,
               decay_rank=32, a_log_len=8, experts=32, top_k=4, expert_width=64, latent=128, dense_width=512,
               block_size=4, vision_blocks=1, vision_hidden=64)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    folder = tmp_path / "repo"
    write_k3_checkpoint(folder, SMALL, shards=8, sparse=True)
    with HubServer() as server:
        server.add_repo("org/k3-small", str(folder))
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield server, folder


def _header_bytes(folder) -> int:
    total = 0
    for p in sorted(folder.glob("*.safetensors")):
        with open(p, "rb") as f:
            total += 8 + int.from_bytes(f.read(8), "little")
    return total


def test_remote_reads_only_headers_and_matches_local(hub):
    server, folder = hub
    server.delay_s = 0.05  # makes parallel requests overlap measurably
    remote = inspect_checkpoint("org/k3-small@main")
    local = inspect_checkpoint(str(folder))
    assert remote["source"] == {"kind": "hub", "location": "org/k3-small", "revision": "main"}
    for key in ("layers", "params", "features", "quantization", "architecture"):
        assert remote[key] == local[key]
    headers = _header_bytes(folder)
    shard_bytes = server.bytes_served(lambda p: p.endswith(".safetensors"))
    assert headers <= shard_bytes <= 1.1 * headers
    listing = server.bytes_served(lambda p: not p.endswith(".safetensors"))
    assert remote["storage"]["header_bytes_read"] == shard_bytes + listing - server.bytes_served(
        lambda p: "/api/" in p)
    assert server.max_active > 1  # shards fetched in parallel


def test_429_and_500_are_retried(hub):
    server, folder = hub
    shard = sorted(p.name for p in folder.glob("*.safetensors"))[3]
    server.fail[f"/org/k3-small/resolve/main/{shard}"] = [429, 500, 503]
    doc = inspect_checkpoint("org/k3-small")
    assert doc["storage"]["files"] == 8
    assert server.fail[f"/org/k3-small/resolve/main/{shard}"] == []


def test_persistent_5xx_gives_up_with_a_message(hub, monkeypatch):
    server, folder = hub
    monkeypatch.setattr("archprobe.formats.hub.BACKOFF_S", 0.001)
    server.fail["/org/k3-small/resolve/main/config.json"] = [502] * 20
    with pytest.raises(SourceError, match="HTTP 502"):
        inspect_checkpoint("org/k3-small")


def test_missing_repo_is_one_clear_message(hub):
    with pytest.raises(SourceError, match="not found"):
        inspect_checkpoint("org/does-not-exist")


def test_gated_repo_is_one_clear_message(hub):
    server, _ = hub
    server.gated.add("org/k3-small")
    with pytest.raises(SourceError, match="gated") as info:
        inspect_checkpoint("org/k3-small")
    assert "HF_TOKEN" in info.value.hint


def test_missing_revision(hub):
    server, folder = hub
    # our stand-in serves any revision for the tree; a missing file under a revision is a 404
    server.fail["/org/k3-small/resolve/v9/config.json"] = [404]
    with pytest.raises(SourceError, match="404"):
        inspect_checkpoint("org/k3-small@v9")


@pytest.mark.parametrize("shard_name", [
    "model-{k:05d}-of-{n:06d}.safetensors",   # Kimi K3 as published: five digits, then six
    "model-{k}-of-{n}.safetensors",           # Kimi K2 as published: no padding (`-1-of-61`)
    "model-{k:05d}-of-{n:05d}.safetensors",   # transformers' save_pretrained
])
def test_published_shard_names_need_no_index(tmp_path, monkeypatch, shard_name):
    """A listing that names a complete numbered set, whatever its digit widths: the index is never
    requested, remotely or locally, and every byte sent is a header byte or the listing."""
    folder = tmp_path / "repo"
    write_k3_checkpoint(folder, SMALL, shards=12, sparse=True, shard_name=shard_name)
    names = sorted(p.name for p in folder.glob("*.safetensors"))
    assert shard_name.format(k=1, n=12) in names and len(names) == 12
    with HubServer() as server:
        server.add_repo("org/k3-names", str(folder))
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        remote = inspect_checkpoint("org/k3-names")
        paths = [p for _, p, _ in server.served]
        assert not [p for p in paths if "index.json" in p], paths
        assert server.bytes_served(lambda p: p.endswith(".safetensors")) <= 1.05 * _header_bytes(folder)
    os.remove(folder / "model.safetensors.index.json")   # locally too: the set alone names the shards
    local = inspect_checkpoint(str(folder))
    assert remote["params"] == local["params"] and remote["layers"] == local["layers"]


@pytest.mark.parametrize("names,complete", [
    (["m-1-of-3.safetensors", "m-2-of-3.safetensors", "m-3-of-3.safetensors"], True),
    (["m-001-of-3.safetensors", "m-002-of-3.safetensors", "m-003-of-3.safetensors"], True),
    (["m-1-of-3.safetensors", "m-02-of-3.safetensors", "m-3-of-3.safetensors"], False),   # mixed widths
    (["m-1-of-3.safetensors", "m-3-of-3.safetensors"], False),                            # one missing
    (["m-0-of-2.safetensors", "m-1-of-2.safetensors"], False),                            # numbered from 0
    (["m-1-of-2.safetensors", "m-2-of-2.safetensors", "m-3-of-2.safetensors"], False),    # past the count
    (["m-1-of-0.safetensors"], False),
])
def test_numbered_set_rule(names, complete):
    from archprobe.formats.checkpoint import numbered_shards

    got = numbered_shards(names)
    assert (got == sorted(names, key=lambda n: int(n.split("-")[1]))) if complete else got is None
