"""validate from a hub repo (only the needed shards), --prompt via tokenizer.json, --offload-dir,
and --pin-routing."""

from __future__ import annotations

import pytest
import torch

from archprobe.validate import validate

pytestmark = pytest.mark.needs_transformers
IDS = [5, 17, 3, 99, 42, 7, 250, 1]


def save_tiny(name, folder, shard="2000GB"):
    from tests.support.tiny_models import build, perturb

    return build(name, folder, adjust=perturb, max_shard_size=shard)


def test_hub_source_downloads_only_the_shards_it_runs(tmp_path, monkeypatch):
    from tests.support.hub_server import HubServer

    local = tmp_path / "local"
    save_tiny("deepseek_v3", local, shard="40KB")
    with HubServer() as hub:
        hub.add_repo("org/tiny-dsv3", str(local))
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        doc = validate("org/tiny-dsv3", prompt_ids=IDS, layers="0-0")
        fetched_paths = {p for m, p, _ in hub.served if m == "GET" and "/resolve/" in p}
    f = doc["fetched"]
    assert f["layers"] == 1 and 0 < len(f["shards_downloaded"]) < f["shards_total"], f
    served_shards = {p.rsplit("/", 1)[1] for p in fetched_paths if p.endswith(".safetensors")}
    assert served_shards == set(f["shards_downloaded"])
    assert f["bytes_downloaded"] < f["bytes_total"]
    here = validate(str(local), prompt_ids=IDS, layers="0-0")
    assert doc["status"] == here["status"] == "ran"
    assert [la["out_rms"] for la in doc["layers"]] == [la["out_rms"] for la in here["layers"]]


def test_prompt_text_uses_tokenizer_json(tmp_path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    save_tiny("llama", tmp_path)
    vocab = {f"w{i}": i for i in range(256)}
    tok = Tokenizer(WordLevel(vocab, unk_token="w0"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    by_text = validate(str(tmp_path), prompt="w5 w17 w3 w99")
    by_ids = validate(str(tmp_path), prompt_ids=[5, 17, 3, 99])
    assert [la["out_rms"] for la in by_text["layers"]] == [la["out_rms"] for la in by_ids["layers"]]


def test_prompt_without_tokenizer_is_a_clear_error(tmp_path):
    from archprobe.errors import ArchprobeError

    save_tiny("llama", tmp_path)
    with pytest.raises(ArchprobeError, match="no tokenizer.json"):
        validate(str(tmp_path), prompt="hello")


def test_offload_dir_gives_the_same_comparison(tmp_path):
    save_tiny("llama", tmp_path / "m")
    plain = validate(str(tmp_path / "m"), prompt_ids=IDS, reference="transformers")
    off = validate(str(tmp_path / "m"), prompt_ids=IDS, reference="transformers", offload_dir=str(tmp_path / "off"))
    assert off["status"] == "pass" and off["offload"]["layers"] == len(off["layers"])
    assert off["offload"]["bytes"] > 0
    assert off["reference"]["per_layer_max_abs_diff"] == plain["reference"]["per_layer_max_abs_diff"]
    assert list((tmp_path / "off").iterdir()) == []   # temporary: removed after the comparison


def test_pin_routing_runs_the_reference_first_and_pins_every_moe_layer(tmp_path):
    model = save_tiny("deepseek_v3", tmp_path)
    doc = validate(str(tmp_path), prompt_ids=IDS, reference="transformers", pin_routing=True)
    moe_layers = model.config.num_hidden_layers - model.config.first_k_dense_replace
    assert doc["routing_pinned"]["layers"] == moe_layers
    assert doc["routing_pinned"]["tokens_flipped"] == 0      # fp32: nothing to pin away
    ref = doc["reference"]
    assert ref["max_abs_diff"] <= 1e-4 * ref["logit_scale"] and ref["top1_agreement"] == 1.0


def test_pinned_moe_takes_the_pinned_choice():
    from archprobe.nn.moe import MoE

    torch.manual_seed(0)
    moe = MoE(16, 8, 2, 8, score="sigmoid", router_bias=False).eval()
    x = torch.randn(1, 5, 16)
    pin = torch.randn(1, 5, 16) * 3
    with torch.no_grad():
        moe(x, pin_input=pin)
    forced = moe.last_routing[0]
    _, expected = moe.route(pin.reshape(-1, 16))
    _, own = moe.route(x.reshape(-1, 16))
    assert torch.equal(forced, expected)
    assert moe.pinned_flips == int((expected.sort(-1).values != own.sort(-1).values).any(-1).sum()) > 0


def test_pin_routing_needs_a_reference(tmp_path):
    from archprobe.errors import ArchprobeError

    save_tiny("llama", tmp_path)
    with pytest.raises(ArchprobeError, match="reference"):
        validate(str(tmp_path), pin_routing=True)
