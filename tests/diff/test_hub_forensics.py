"""Revision and mirror forensics against the hub stand-in (real sha256 of the files it serves): one changed
shard between two revisions is found, a mirror under another repo id is byte-identical, a moved file is a
move, malformed digests are never trusted, and no shard data is downloaded."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from safetensors.numpy import save_file

from archprobe.diff.files import compare_listings, file_diff
from archprobe.diff.headers import diff_sources
from archprobe.formats.hub import file_hash, list_hashes
from tests.support.cli import invoke
from tests.support.hub_server import HubServer

H = 32


def _checkpoint(folder, seed: int = 0, perturb_shard2: bool = False) -> str:
    """A real two-shard llama checkpoint with values; `perturb_shard2` changes one value of shard 2 only
    (same header: only the bytes tell)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    names = {1: ["model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight"],
             2: ["model.layers.1.mlp.up_proj.weight", "model.norm.weight"]}
    shapes = {"model.embed_tokens.weight": (64, H), "model.norm.weight": (H,)}
    weight_map = {}
    for k, shard_names in names.items():
        tensors = {n: rng.standard_normal(shapes.get(n, (2 * H, H))).astype(np.float32) for n in shard_names}
        if perturb_shard2 and k == 2:
            tensors["model.layers.1.mlp.up_proj.weight"][3, 5] += 1.0
        shard = f"model-0000{k}-of-00002.safetensors"
        save_file(tensors, str(folder / shard))
        weight_map |= dict.fromkeys(shard_names, shard)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": H}))
    return str(folder)


@pytest.fixture
def hub(monkeypatch):
    with HubServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield server


def _resolved(server) -> int:
    return server.bytes_served(lambda p: "/resolve/" in p)


def test_the_listing_gives_the_real_sha256_of_each_file(tmp_path, hub):
    import hashlib

    folder = _checkpoint(tmp_path / "v1")
    hub.add_repo("org/m", folder)
    hashes = list_hashes("org/m", "main")
    shard = tmp_path / "v1" / "model-00002-of-00002.safetensors"
    assert hashes[shard.name].sha256 == hashlib.sha256(shard.read_bytes()).hexdigest()
    assert hashes[shard.name].lfs and hashes[shard.name].size == shard.stat().st_size
    cfg = (tmp_path / "v1" / "config.json").read_bytes()
    assert hashes["config.json"].git_oid == hashlib.sha1(b"blob %d\0" % len(cfg) + cfg).hexdigest()
    assert not hashes["config.json"].lfs and hashes["config.json"].sha256 is None
    assert _resolved(hub) == 0


def test_one_changed_shard_between_revisions_with_no_shard_data_downloaded(tmp_path, hub):
    hub.add_repo("org/m", _checkpoint(tmp_path / "v1"), revision="v1")
    hub.add_repo("org/m", _checkpoint(tmp_path / "v2", perturb_shard2=True), revision="v2")
    f = file_diff("org/m@v1", "org/m@v2")
    assert f["shards_changed"] == ["model-00002-of-00002.safetensors"]
    assert [r["path"] for r in f["changed"]["items"]] == ["model-00002-of-00002.safetensors"]
    assert f["identical"] is False and f["weights_identical"] is False and f["same"] == 3
    assert f["added"]["total"] == f["removed"]["total"] == f["moved"]["total"] == f["unverified"]["total"] == 0
    assert _resolved(hub) == 0
    # the full diff: the headers agree (same names, shapes, dtypes), the bytes do not
    hub.served.clear()
    d = diff_sources("org/m@v1", "org/m@v2")
    assert d["tensors"]["total"] == 0 and d["card"]["total"] == 0
    from archprobe.diff.files import add_files

    d = add_files(d, "org/m@v1", "org/m@v2")
    assert d["identical"] is False and d["files"]["shards_changed"] == ["model-00002-of-00002.safetensors"]
    shards = [p for p in (tmp_path / "v1").iterdir() if p.suffix == ".safetensors"]
    headers = sum(8 + int.from_bytes(p.read_bytes()[:8], "little") for p in shards) * 2   # two sides
    assert 0 < hub.bytes_served(lambda p: p.endswith(".safetensors")) <= headers


def test_a_mirror_under_another_name_is_byte_identical(tmp_path, hub):
    original = _checkpoint(tmp_path / "orig")
    copy = tmp_path / "mirror"
    shutil.copytree(original, copy)
    hub.add_repo("org/m", original)
    hub.add_repo("someone/m-mirror", str(copy))
    f = file_diff("org/m", "someone/m-mirror")
    assert f["identical"] is True and f["weights_identical"] is True and f["same"] == f["files_a"] == 4
    # a mirror that adds its own README: the files differ, the weights do not
    (copy / "README.md").write_text("mirrored from org/m")
    f = file_diff("org/m", "someone/m-mirror")
    assert f["identical"] is False and f["weights_identical"] is True and f["shards_changed"] == []
    assert f["model_identical"] is True
    assert [r["path"] for r in f["added"]["items"]] == ["README.md"]
    from archprobe.diff.files import add_files

    d = add_files(diff_sources("org/m", "someone/m-mirror"), "org/m", "someone/m-mirror")
    assert d["identical"] is True          # no false difference: the model is the same
    hub.served.clear()                     # (the header diff read the headers; the file checks read nothing)
    # a mirror that edits its tokenizer is another model, though its weights are the same bytes
    (copy / "tokenizer_config.json").write_text('{"chat_template": "changed"}')
    f = file_diff("org/m", "someone/m-mirror")
    assert f["weights_identical"] is True and f["model_identical"] is False
    # a re-seeded checkpoint under the same file names: every shard differs, and it says so
    other = _checkpoint(tmp_path / "reseeded", seed=1)
    hub.add_repo("someone/m-retrained", other)
    f = file_diff("org/m", "someone/m-retrained")
    assert f["weights_identical"] is False
    assert sorted(f["shards_changed"]) == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert _resolved(hub) == 0


def test_a_renamed_file_with_the_same_bytes_is_a_move(tmp_path, hub):
    original = _checkpoint(tmp_path / "orig")
    copy = tmp_path / "moved"
    shutil.copytree(original, copy)
    (copy / "model-00002-of-00002.safetensors").rename(copy / "weights-2.safetensors")
    hub.add_repo("org/m", original)
    hub.add_repo("x/m", str(copy))
    f = file_diff("org/m", "x/m")
    assert f["moved"]["items"][0]["a"] == "model-00002-of-00002.safetensors"
    assert f["moved"]["items"][0]["b"] == "weights-2.safetensors"
    assert f["removed"]["total"] == f["added"]["total"] == 0 and f["identical"] is False


@pytest.mark.parametrize("lfs", [{"oid": "ab" * 31 + "a", "size": 10},       # 63 hex chars
                                 {"oid": "XY" * 32, "size": 10},             # not hex
                                 {"oid": "AB" * 32, "size": 10},             # upper case: not the hub's form
                                 {"oid": 12345, "size": 10},                 # not a string
                                 {"oid": ["ab" * 32], "size": 10},
                                 "ab" * 32])                                 # lfs not an object
def test_a_malformed_sha256_is_never_trusted(tmp_path, hub, lfs):
    row = {"type": "file", "path": "extra.safetensors", "size": 10, "oid": "0" * 40, "lfs": lfs}
    h = file_hash(row)
    assert h.sha256 is None and h.problem
    folder = _checkpoint(tmp_path / "a")
    hub.add_repo("org/a", folder)
    hub.add_repo("org/b", folder)
    hub.listing_extra["org/a"] = [row]
    hub.listing_extra["org/b"] = [row]
    f = file_diff("org/a", "org/b")
    assert f["identical"] is False and f["weights_identical"] is False   # same bad text on both sides: unproven
    assert [r["path"] for r in f["unverified"]["items"]] == ["extra.safetensors"]


def test_malformed_git_oids_and_sizes_are_not_digests():
    assert file_hash({"path": "c.json", "oid": "g" * 40}).problem
    assert file_hash({"path": "c.json", "oid": None}).git_oid is None
    assert file_hash({"path": "c.json", "oid": "a" * 40, "size": -1}).size is None
    a = {"c.json": file_hash({"path": "c.json", "oid": "a" * 40})}
    b = {"c.json": file_hash({"path": "c.json", "oid": None})}
    assert compare_listings(a, b)["unverified"]["items"][0]["path"] == "c.json"


def test_cli_files_only_json_text_and_errors(tmp_path, hub):
    hub.add_repo("org/m", _checkpoint(tmp_path / "v1"), revision="v1")
    hub.add_repo("org/m", _checkpoint(tmp_path / "v2", perturb_shard2=True), revision="v2")
    res = invoke("diff", "org/m@v1", "org/m@v2", "--files-only", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["identical"] is False and doc["files"]["shards_changed"] == ["model-00002-of-00002.safetensors"]
    assert "card" not in doc and _resolved(hub) == 0
    res = invoke("diff", "org/m@v1", "org/m@v2", "--files-only")
    assert res.exit_code == 0 and "model-00002-of-00002.safetensors" in res.output and "differ" in res.output
    res = invoke("diff", "org/m@v1", "org/m@v1")       # full diff, text
    assert res.exit_code == 0 and "byte-identical" in res.output and "no differences" in res.output
    res = invoke("diff", str(tmp_path / "nowhere"), "org/m@v2", "--files-only")
    assert res.exit_code != 0 and "neither a local folder" in res.output and "Traceback" not in res.output


def test_a_local_download_against_the_hub(tmp_path, hub):
    """--files-only with a local folder hashes it (sha256 and git blob id) and compares with the hub's digests."""
    hub.add_repo("org/m", _checkpoint(tmp_path / "v1"), revision="v1")
    hub.add_repo("org/m", _checkpoint(tmp_path / "v2", perturb_shard2=True), revision="v2")
    (tmp_path / "v1" / ".cache").mkdir()          # huggingface_hub's download bookkeeping: not the model
    (tmp_path / "v1" / ".cache" / "x.lock").write_text("")
    same = file_diff(str(tmp_path / "v1"), "org/m@v1")
    assert same["identical"] is True and same["same"] == 4 and same["a"] == {"path": str(tmp_path / "v1")}
    other = file_diff(str(tmp_path / "v1"), "org/m@v2")
    assert other["shards_changed"] == ["model-00002-of-00002.safetensors"] and other["same"] == 3
    local_pair = file_diff(str(tmp_path / "v1"), str(tmp_path / "v2"))
    assert local_pair["shards_changed"] == ["model-00002-of-00002.safetensors"]
    one = file_diff(str(tmp_path / "v2" / "config.json"), str(tmp_path / "v1" / "config.json"))
    assert one["identical"] is True
    assert _resolved(hub) == 0


def test_a_gguf_mirror_that_renamed_its_file_carries_the_same_weights(tmp_path, hub):
    import gguf

    from tests.support.gguf_files import write_tiny_gguf

    orig, mirror = tmp_path / "orig", tmp_path / "mirror"
    orig.mkdir()
    mirror.mkdir()
    write_tiny_gguf(orig / "m-Q8_0.gguf")
    write_tiny_gguf(orig / "m-Q4_0.gguf", gguf.GGMLQuantizationType.Q4_0)
    shutil.copy(orig / "m-Q4_0.gguf", mirror / "M-q4_0.gguf")          # one quant only, renamed
    hub.add_repo("org/m-GGUF", str(orig))
    hub.add_repo("x/m-GGUF", str(mirror))
    f = file_diff("org/m-GGUF:Q4_0", "x/m-GGUF:Q4_0")
    assert f["weights_identical"] is True and f["identical"] is False
    assert f["moved"]["items"] == [{"a": "m-Q4_0.gguf", "b": "M-q4_0.gguf", "sha256": f["moved"]["items"][0]["sha256"]}]
    assert f["a"]["tag"] == "Q4_0"
    f = file_diff("org/m-GGUF:Q8_0", "x/m-GGUF:Q4_0")                   # another quantization: not the same
    assert f["weights_identical"] is False
    assert file_diff("org/m-GGUF", "x/m-GGUF")["weights_identical"] is False   # the whole repos differ
    assert _resolved(hub) == 0


def test_huggingface_hub_reads_the_same_digests_from_the_stand_in(tmp_path, hub):
    """The official client parses the stand-in's tree and blobs answers into the digests list_hashes reads."""
    from huggingface_hub import HfApi

    hub.add_repo("org/m", _checkpoint(tmp_path / "v1"))
    api = HfApi(endpoint=hub.url, token=False)
    ours = list_hashes("org/m", "main")
    tree = {f.path: f for f in api.list_repo_tree("org/m", recursive=True)}
    info = {s.rfilename: s for s in api.model_info("org/m", files_metadata=True).siblings}
    assert set(tree) == set(info) == set(ours)
    for path, h in ours.items():
        lfs_tree, lfs_info = tree[path].lfs, info[path].lfs
        assert (lfs_tree is not None) == (lfs_info is not None) == h.lfs
        if h.lfs:
            assert lfs_tree.sha256 == lfs_info.sha256 == h.sha256
        assert tree[path].blob_id == info[path].blob_id == h.git_oid
    assert _resolved(hub) == 0
