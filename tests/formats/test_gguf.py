"""GGUF files written with the gguf package: our header parser agrees with the package's reader, types
map to parameters, split shards and several models in one folder or hub repo are told apart, hostile
headers are clean errors, and a hub repo's headers come by a few Range reads."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from archprobe.errors import CheckpointError, SourceError
from archprobe.formats.gguf import read_gguf
from archprobe.structure.inspect import inspect_checkpoint
from tests.support.gguf_files import write_tiny_gguf
from tests.support.hub_server import HubServer


def test_gguf_structure_and_params(tmp_path):
    expected = write_tiny_gguf(tmp_path / "m.gguf")
    doc = inspect_checkpoint(str(tmp_path / "m.gguf"))
    assert doc["source"]["kind"] == "gguf"
    assert doc["params"]["total"] == expected
    assert [(layer["mixer"], layer["ffn"]) for layer in doc["layers"]] == [("gqa", "dense")] * 2
    feats = {f["id"]: f for f in doc["features"]}
    assert feats["attention.gqa"]["attrs"]["num_kv_heads"] == 2
    q = feats["quant.gguf_q8_0"]
    assert q["attrs"]["tensors"] == 14 and q["attrs"]["group_size"] == 32 and q["attrs"]["bits"] == 8.5
    assert q["evidence"][0]["tensor"].startswith("blk.")  # the file's own tensor names
    assert doc["storage"]["header_bytes_read"] < doc["storage"]["bytes"]


def test_truncated_gguf_is_a_clean_error(tmp_path):
    write_tiny_gguf(tmp_path / "m.gguf")
    raw = (tmp_path / "m.gguf").read_bytes()
    (tmp_path / "bad.gguf").write_bytes(raw[:100])
    with pytest.raises(CheckpointError, match="bad.gguf"):
        inspect_checkpoint(str(tmp_path / "bad.gguf"))


def _reference(path):
    """Tensors and kept metadata as the gguf package's own reader sees them (the independent peer)."""
    reader = gguf.GGUFReader(str(path), "r")
    tensors = [(t.name, f"GGUF_{gguf.GGMLQuantizationType(t.tensor_type).name}",
                tuple(int(x) for x in reversed(t.shape.tolist())), int(t.n_bytes)) for t in reader.tensors]
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or (key.startswith("tokenizer.ggml.") and key != "tokenizer.ggml.model"):
            continue   # the reader's own fields (version, counts); tokenizer arrays are walked over, not kept
        meta[key] = field.contents()
    return tensors, meta, len(reader.fields["tokenizer.ggml.tokens"].data)


@pytest.mark.parametrize("quant", [gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0,
                                   gguf.GGMLQuantizationType.F16])
def test_parser_agrees_with_the_gguf_package(tmp_path, quant):
    write_tiny_gguf(tmp_path / "m.gguf", quant, vocab_words=3000)
    header, meta, cfg = read_gguf(tmp_path / "m.gguf")
    tensors, ref_meta, n_tokens = _reference(tmp_path / "m.gguf")
    assert [(t.name, t.dtype, t.shape, t.nbytes) for t in header.tensors] == tensors
    skip = ("tokenizer.ggml.tokens.count", "test.nested")   # the package's contents() flattens nested arrays
    assert {k: v for k, v in meta.items() if k not in skip} == {k: v for k, v in ref_meta.items() if k not in skip}
    assert ref_meta["test.nested"] == [1, 2, 3]
    assert meta["tokenizer.ggml.tokens.count"] == n_tokens == cfg["vocab_size"] == 3000
    assert meta["test.nested"] == [[1, 2], [3]] and meta["test.text"] == "héllo" and meta["test.flag"] is True
    assert header.header_bytes < header.file_bytes == (tmp_path / "m.gguf").stat().st_size


def _patched(tmp_path, offset, raw_bytes):
    write_tiny_gguf(tmp_path / "m.gguf")
    data = bytearray((tmp_path / "m.gguf").read_bytes())
    data[offset:offset + len(raw_bytes)] = raw_bytes
    (tmp_path / "bad.gguf").write_bytes(bytes(data))
    return str(tmp_path / "bad.gguf")


@pytest.mark.parametrize("offset, raw, message", [
    (0, b"GGUX", "not a GGUF file"),
    (4, (1).to_bytes(4, "little"), "version 1 is not supported"),
    (4, (3).to_bytes(4, "big"), "big-endian"),
    (8, (1 << 40).to_bytes(8, "little"), "tensor count is 1,099,511,627,776, over"),
    (16, (1 << 40).to_bytes(8, "little"), "metadata count"),
])
def test_hostile_headers_are_clean_errors(tmp_path, offset, raw, message):
    with pytest.raises(CheckpointError, match=message):
        inspect_checkpoint(_patched(tmp_path, offset, raw))


def test_deeply_nested_arrays_are_refused(tmp_path):
    key = b"x.deep"
    nest = (9).to_bytes(4, "little") + (1).to_bytes(8, "little")      # ARRAY of 1 item, item type ARRAY...
    raw = (b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
           + len(key).to_bytes(8, "little") + key + (9).to_bytes(4, "little") + nest * 100_000)
    (tmp_path / "deep.gguf").write_bytes(raw)
    with pytest.raises(CheckpointError, match="nests arrays deeper than 8"):
        inspect_checkpoint(str(tmp_path / "deep.gguf"))


def test_tensor_data_past_the_end_is_refused(tmp_path):
    write_tiny_gguf(tmp_path / "m.gguf")
    header, _, _ = read_gguf(tmp_path / "m.gguf")
    with open(tmp_path / "m.gguf", "r+b") as f:
        f.truncate(header.header_bytes + 100)
    with pytest.raises(CheckpointError, match="lies past the end of the file"):
        inspect_checkpoint(str(tmp_path / "m.gguf"))


def test_split_shards_are_one_model(tmp_path):
    expected = write_tiny_gguf(tmp_path / "whole.gguf")
    (tmp_path / "split").mkdir()
    write_tiny_gguf(tmp_path / "split" / "m.gguf", split_max_tensors=7)
    shards = sorted(p.name for p in (tmp_path / "split").iterdir())
    assert shards == ["m-00001-of-00003.gguf", "m-00002-of-00003.gguf", "m-00003-of-00003.gguf"]
    for source in (tmp_path / "split", tmp_path / "split" / shards[1]):   # the folder, or any one shard
        doc = inspect_checkpoint(str(source))
        assert doc["params"]["total"] == expected and len(doc["layers"]) == 2
    (tmp_path / "split" / shards[2]).unlink()
    with pytest.raises(CheckpointError, match="lacks shard"):
        inspect_checkpoint(str(tmp_path / "split"))
    with pytest.raises(CheckpointError, match="m-00003-of-00003.gguf: shard of a 3-file split GGUF is missing"):
        inspect_checkpoint(str(tmp_path / "split" / shards[0]))


def _variants(folder):
    folder.mkdir()
    q8 = write_tiny_gguf(folder / "m-Q8_0.gguf")
    f16 = write_tiny_gguf(folder / "m-F16.gguf", gguf.GGMLQuantizationType.F16, vocab_words=60000,
                 embedding_rows=60000)   # the largest: a 1.8 MB header, 15 MB of embeddings
    w = gguf.GGUFWriter(str(folder / "mmproj-m-F16.gguf"), "clip")
    w.add_tensor("v.patch_embd.weight", np.ones((8, 8), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return q8, f16


def test_a_folder_of_variants_inspects_one_and_says_so(tmp_path):
    q8, f16 = _variants(tmp_path / "repo")
    doc = inspect_checkpoint(str(tmp_path / "repo"))
    assert doc["params"]["total"] == f16   # one model counted, not three files
    assert any("inspected the largest, m-F16" in w and "m-Q8_0" in w for w in doc["warnings"])
    assert any("mmproj-m-F16.gguf" in w for w in doc["warnings"])
    assert {f["id"] for f in doc["features"]} & {"quant.gguf_q8_0"} == set()


@pytest.fixture
def gguf_hub(tmp_path, monkeypatch):
    _variants(tmp_path / "repo")
    with HubServer() as server:
        server.add_repo("org/m-GGUF", str(tmp_path / "repo"))
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield server, tmp_path / "repo"


def test_hub_gguf_reads_headers_by_range_and_matches_local(gguf_hub):
    server, folder = gguf_hub
    remote = inspect_checkpoint("org/m-GGUF")
    local = inspect_checkpoint(str(folder / "m-F16.gguf"))
    assert remote["source"] == {"kind": "gguf", "location": "org/m-GGUF", "revision": "main"}
    for key in ("params", "layers", "features"):
        assert remote[key] == local[key]
    assert any("inspected the largest, m-F16" in w for w in remote["warnings"])
    f16 = [n for m, p, n in server.served if m == "GET" and p.endswith("m-F16.gguf")]
    size = (folder / "m-F16.gguf").stat().st_size
    header = read_gguf(folder / "m-F16.gguf")[0].header_bytes
    assert header > 1 << 20 and len(f16) == 2        # a >1 MB header in two Range reads (1 MB, then 2 MB)
    assert header <= sum(f16) < size                 # the header, never the whole file
    assert not any(p.endswith("m-Q8_0.gguf") for _, p, _ in server.served)


def test_hub_gguf_tag_picks_a_model(gguf_hub):
    _, folder = gguf_hub
    doc = inspect_checkpoint("org/m-GGUF@main:q8_0")
    assert doc["params"] == inspect_checkpoint(str(folder / "m-Q8_0.gguf"))["params"]
    assert "quant.gguf_q8_0" in {f["id"] for f in doc["features"]}
    for tag, message in (("m", "names 2 of the GGUF models"), ("Q4_K_M", "names no")):
        with pytest.raises(SourceError, match=message):
            inspect_checkpoint(f"org/m-GGUF:{tag}")
