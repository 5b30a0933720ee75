"""validate on GGUF hub repos: `org/name:TAG` downloads the GGUF model the tag names (sha256-checked against
the hub's listing) into the cache and validates it exactly as the local file; a corrupted download is
discarded; a tag that names no model is one line."""

from __future__ import annotations

import hashlib
import os

import gguf
import numpy as np
import pytest

from archprobe.errors import SourceError
from archprobe.validate import validate
from tests.support.cli import invoke
from tests.support.gguf_files import write_tiny_gguf
from tests.support.hub_server import HubServer

IDS = [1, 2, 3, 4, 5, 6, 7, 8]


@pytest.fixture
def hub(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path / "cache"))
    with HubServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield server


@pytest.fixture
def gguf_repo(tmp_path):
    """Two quantizations of one tiny llama, as a GGUF repo publishes them."""
    folder = tmp_path / "repo"
    folder.mkdir()
    write_tiny_gguf(folder / "tiny-Q8_0.gguf", gguf.GGMLQuantizationType.Q8_0, runnable=True)
    write_tiny_gguf(folder / "tiny-Q4_0.gguf", gguf.GGMLQuantizationType.Q4_0, runnable=True)
    (folder / "README.md").write_text("tiny")
    return folder


def _logits(path):
    from safetensors.numpy import load_file

    return load_file(str(path))["logits"]


def test_a_tagged_gguf_model_from_the_hub_validates_as_the_local_file(tmp_path, hub, gguf_repo):
    hub.add_repo("org/tiny-GGUF", str(gguf_repo))
    hub_out, local_out = tmp_path / "hub.safetensors", tmp_path / "local.safetensors"
    doc = validate("org/tiny-GGUF:Q4_0", IDS, save_logits=str(hub_out))
    local = validate(str(gguf_repo / "tiny-Q4_0.gguf"), IDS, save_logits=str(local_out))
    assert doc["status"] == local["status"] == "ran", doc
    assert doc["mapped_tensors"] == local["mapped_tensors"] > 0 and not doc["missing_tensors"]
    np.testing.assert_array_equal(_logits(hub_out), _logits(local_out))
    f = doc["fetched"]
    want = hashlib.sha256((gguf_repo / "tiny-Q4_0.gguf").read_bytes()).hexdigest()
    assert f["gguf_files"] == ["tiny-Q4_0.gguf"] and f["sha256"] == {"tiny-Q4_0.gguf": want}
    # only the chosen file moved: not the Q8_0 one
    assert hub.bytes_served(lambda p: p.endswith("tiny-Q8_0.gguf")) == 0
    assert hub.bytes_served(lambda p: p.endswith("tiny-Q4_0.gguf")) == os.path.getsize(gguf_repo / "tiny-Q4_0.gguf")
    # the second run finds the verified file in the cache
    hub.served.clear()
    validate("org/tiny-GGUF:Q4_0", IDS)
    assert hub.bytes_served(lambda p: "/resolve/" in p) == 0
    # the full file name is a tag too, and the Q8_0 model gives other logits
    q8 = tmp_path / "q8.safetensors"
    validate("org/tiny-GGUF:tiny-Q8_0.gguf", IDS, save_logits=str(q8))
    assert not np.array_equal(_logits(q8), _logits(hub_out))


def test_a_repo_with_only_one_gguf_needs_no_tag(tmp_path, hub):
    folder = tmp_path / "one"
    folder.mkdir()
    write_tiny_gguf(folder / "only-Q8_0.gguf", runnable=True)
    hub.add_repo("org/only", str(folder))
    doc = validate("org/only@main", IDS)
    assert doc["status"] == "ran" and doc["fetched"]["gguf_files"] == ["only-Q8_0.gguf"]


def test_a_download_whose_bytes_are_not_the_listed_sha256_is_discarded(tmp_path, hub, gguf_repo):
    hub.add_repo("org/tiny-GGUF", str(gguf_repo))
    name = "tiny-Q4_0.gguf"
    good = (gguf_repo / name).read_bytes()
    bad = bytearray(good)
    bad[-1] ^= 0xFF     # same size, one byte flipped in the tensor data

    def corrupted(h, head):
        h.send_response(200)
        h.send_header("Content-Length", str(len(bad)))
        h.end_headers()
        h.wfile.write(bytes(bad))

    hub.hooks[f"/org/tiny-GGUF/resolve/main/{name}"] = corrupted
    with pytest.raises(SourceError, match="sha256"):
        validate("org/tiny-GGUF:Q4_0", IDS)
    cached = list((tmp_path / "cache").rglob("*.gguf*"))
    assert cached == []       # neither the file nor its .part is kept


def test_a_malformed_listed_sha256_refuses_the_download(tmp_path, hub):
    folder = tmp_path / "one"
    folder.mkdir()
    hub.add_repo("org/odd", str(folder))
    hub.listing_extra["org/odd"] = [{"type": "file", "path": "m-Q8_0.gguf", "size": 100, "oid": "0" * 40,
                                     "lfs": {"oid": "not-a-digest", "size": 100}}]
    with pytest.raises(SourceError, match="not 64 lowercase hex"):
        validate("org/odd:Q8_0", IDS)
    assert hub.bytes_served(lambda p: "/resolve/" in p) == 0


def test_a_tag_that_names_no_model_is_one_line(hub, gguf_repo):
    hub.add_repo("org/tiny-GGUF", str(gguf_repo))
    res = invoke("validate", "org/tiny-GGUF:Q5_K_M", "--prompt-ids", "1,2,3")
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "names no" in res.output and "tiny-Q4_0" in res.output


def test_the_real_smollm2_gguf_from_the_hub_validates_as_the_local_file(tmp_path, hub):
    from tests.support import real_models

    path = real_models.smollm2_gguf()
    folder = tmp_path / "smol"
    folder.mkdir()
    os.symlink(path, folder / os.path.basename(path))
    hub.add_repo("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", str(folder))
    doc = validate("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_1", IDS, layers="0-1")
    local = validate(path, IDS, layers="0-1")
    assert doc["status"] == local["status"] and doc["mapped_tensors"] == local["mapped_tensors"] > 0
    timeless = lambda layers: [{k: v for k, v in r.items() if k != "seconds"} for r in layers]  # noqa: E731
    assert timeless(doc["layers"]) == timeless(local["layers"]) and len(doc["layers"]) == 2
    with open(path, "rb") as f:
        assert doc["fetched"]["sha256"][os.path.basename(path)] == hashlib.file_digest(f, "sha256").hexdigest()


def test_a_split_gguf_model_downloads_every_part(tmp_path, hub):
    from archprobe.formats.gguf import choose_model

    folder = tmp_path / "split"
    folder.mkdir()
    write_tiny_gguf(folder / "tiny-Q8_0.gguf", runnable=True, split_max_tensors=8)
    parts = sorted(p.name for p in folder.iterdir())
    assert len(parts) > 1 and all("-of-" in p for p in parts)
    write_tiny_gguf(folder / "other-Q4_0.gguf", gguf.GGMLQuantizationType.Q4_0, runnable=True)
    hub.add_repo("org/split", str(folder))
    # a part's file name names its whole model
    assert choose_model(parts + ["other-Q4_0.gguf"], {}, parts[-1], "here")[0] == parts
    doc = validate(f"org/split:{parts[-1]}", IDS)
    assert doc["status"] == "ran" and doc["fetched"]["gguf_files"] == parts
    local = validate(str(folder / parts[0]), IDS)
    assert doc["mapped_tensors"] == local["mapped_tensors"] > 0


def test_a_gguf_model_in_a_subfolder_of_the_repo(tmp_path, hub):
    folder = tmp_path / "nested"
    (folder / "Q4_0").mkdir(parents=True)
    write_tiny_gguf(folder / "Q4_0" / "tiny-Q4_0.gguf", gguf.GGMLQuantizationType.Q4_0, runnable=True)
    write_tiny_gguf(folder / "tiny-Q8_0.gguf", runnable=True)
    hub.nested = True
    hub.add_repo("org/nested", str(folder))
    doc = validate("org/nested:Q4_0", IDS)
    assert doc["status"] == "ran" and doc["fetched"]["gguf_files"] == ["Q4_0/tiny-Q4_0.gguf"]
    cached = [p for p in (tmp_path / "cache").rglob("*.gguf")]
    assert [p.parent.name for p in cached] == ["Q4_0"]     # one below the repo's cache folder, nowhere else
