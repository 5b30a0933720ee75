"""`archprobe diff` from headers: a checkpoint against itself has no differences; one re-typed, renamed or
re-configured tensor or key is exactly that difference; K3 against its renamed twin and an HF checkpoint
against its own GGUF conversion match every tensor by role; different architectures compare without a
traceback; the CLI prints JSON, "no differences", inert hostile names, and one-line errors."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from archprobe.diff.headers import SCHEMA, diff_sources, match_renames
from archprobe.writers.safetensors import write_safetensors
from tests.support.cli import invoke

H, L, V, FF, HEADS, KV = 64, 2, 256, 128, 4, 2
HD = H // HEADS
PAYLOAD = "[/][bold red]<script>\x1b[2J"


def _inventory() -> dict[str, tuple[str, tuple[int, ...]]]:
    t = {"model.embed_tokens.weight": ("F32", (V, H)), "model.norm.weight": ("F32", (H,)),
         "lm_head.weight": ("F32", (V, H))}
    for i in range(L):
        p = f"model.layers.{i}."
        t |= {p + "self_attn.q_proj.weight": ("F32", (HEADS * HD, H)),
              p + "self_attn.k_proj.weight": ("F32", (KV * HD, H)),
              p + "self_attn.v_proj.weight": ("F32", (KV * HD, H)),
              p + "self_attn.o_proj.weight": ("F32", (H, HEADS * HD)),
              p + "mlp.gate_proj.weight": ("F32", (FF, H)), p + "mlp.up_proj.weight": ("F32", (FF, H)),
              p + "mlp.down_proj.weight": ("F32", (H, FF)), p + "input_layernorm.weight": ("F32", (H,)),
              p + "post_attention_layernorm.weight": ("F32", (H,))}
    return t


def _config(**over) -> dict:
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": H, "num_hidden_layers": L,
            "vocab_size": V, "intermediate_size": FF, "num_attention_heads": HEADS, "num_key_value_heads": KV,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 512, "hidden_act": "silu",
            "bos_token_id": 1, "tie_word_embeddings": False, **over}


def _write(folder, tensors=None, config=None) -> str:
    folder.mkdir(parents=True)
    inv = tensors or _inventory()
    write_safetensors(folder / "model.safetensors", [(n, dt, s, None) for n, (dt, s) in inv.items()])
    (folder / "config.json").write_text(json.dumps(config or _config()))
    return str(folder)


def _no_tensor_changes(d: dict) -> None:
    assert [d["tensors"][k]["total"] for k in ("added", "removed", "renamed", "changed")] == [0, 0, 0, 0]


def test_a_checkpoint_against_itself_has_no_differences(tmp_path):
    a = _write(tmp_path / "a")
    b = _write(tmp_path / "b")        # an identical copy elsewhere
    for other in (a, b):
        d = diff_sources(a, other)
        assert d["schema"] == SCHEMA and d["identical"] is True
        assert d["card"]["total"] == 0 and d["config"]["total"] == 0
        _no_tensor_changes(d)
        assert d["sizes"]["params"]["delta"] == 0 and d["sizes"]["bytes"]["delta"] == 0
        assert d["sizes"]["params"]["a"] > 0


def test_one_retyped_tensor_is_exactly_that_difference(tmp_path):
    a = _write(tmp_path / "a")
    inv = _inventory()
    name = "model.layers.1.self_attn.k_proj.weight"
    inv[name] = ("BF16", inv[name][1])
    d = diff_sources(a, _write(tmp_path / "b", inv))
    assert d["identical"] is False
    t = d["tensors"]
    assert t["added"]["total"] == t["removed"]["total"] == t["renamed"]["total"] == 0
    assert t["changed"]["items"] == [{"a": name, "b": name, "role": "layers.1.mixer.k",
                                      "dtype": {"a": "F32", "b": "BF16"}}]
    assert t["dtype_families"] == [{"family": "layers.{N}.mixer.k", "a": "F32", "b": "BF16", "tensors": 1,
                                    "bytes_a": KV * HD * H * 4, "bytes_b": KV * HD * H * 2}]
    assert d["card"]["total"] == 0 and d["config"]["total"] == 0    # the evidence quoting dtypes is not a field
    assert d["sizes"]["params"]["delta"] == 0
    assert d["sizes"]["bytes"]["delta"] == -KV * HD * H * 2
    attention = L * 4 * (2 * H * H + 2 * KV * HD * H)      # q, o, k, v of every layer, F32
    assert d["sizes"]["bytes"]["by_component"] == [{"component": "attention", "a": attention,
                                                    "b": attention - KV * HD * H * 2, "delta": -KV * HD * H * 2}]


@pytest.mark.parametrize("new", ["model.layers.1.mlp.upper.weight", "model.layers.1.feed_forward.w3.weight"])
def test_one_renamed_tensor_is_exactly_one_rename(tmp_path, new):
    a = _write(tmp_path / "a")
    inv = _inventory()
    old = "model.layers.1.mlp.up_proj.weight"
    inv[new] = inv.pop(old)
    d = diff_sources(a, _write(tmp_path / "b", inv))
    t = d["tensors"]
    assert t["added"]["total"] == 0 and t["removed"]["total"] == 0 and t["changed"]["total"] == 0
    assert [(r["a"], r["b"]) for r in t["renamed"]["items"]] == [(old, new)]
    assert d["config"]["total"] == 0
    if "mlp." in new:    # still in the layer's MLP: bound to the same role, the card unchanged
        assert t["renamed"]["items"][0]["by"] == "role" and d["card"]["total"] == 0
        assert not d["sizes"]["bytes"]["by_component"]
    else:                # moved out of the MLP: B's card no longer binds it as the up projection; the diff says
        assert t["renamed"]["items"][0]["by"] == "shape+dtype in layer" and t["renamed"]["by_shape_fallback"] == 1
        assert {r["path"] for r in d["card"]["items"]} == {"layers.1.ffn.gated"}
        moved = FF * H * 4
        assert {r["component"]: r["delta"] for r in d["sizes"]["bytes"]["by_component"]} == {"dense_ffn": -moved,
                                                                                               "other": moved}
    assert d["sizes"]["bytes"]["delta"] == 0


def test_one_changed_config_key_is_exactly_that_key(tmp_path):
    a = _write(tmp_path / "a")
    d = diff_sources(a, _write(tmp_path / "b", config=_config(bos_token_id=7)))
    c = d["config"]
    assert c["total"] == 1 and c["changed"]["items"] == [{"key": "bos_token_id", "a": 1, "b": 7}]
    assert c["added"]["total"] == c["removed"]["total"] == 0
    assert d["card"]["total"] == 0 and not d["identical"]
    _no_tensor_changes(d)
    # a key the card reads shows in both: the config key and the card field derived from it
    cfg = {k: v for k, v in _config(rope_theta=500000.0).items() if k != "bos_token_id"} | {"head_dim": HD}
    d = diff_sources(a, _write(tmp_path / "c", config=cfg))
    assert [r["key"] for r in d["config"]["changed"]["items"]] == ["rope_theta"]
    assert [r["key"] for r in d["config"]["removed"]["items"]] == ["bos_token_id"]
    assert [r["key"] for r in d["config"]["added"]["items"]] == ["head_dim"]
    assert [(r["path"], r["a"], r["b"]) for r in d["card"]["items"]] == [("rope.theta", 10000.0, 500000.0)]


def test_k3_against_its_renamed_twin_matches_every_tensor_by_role(tmp_path):
    from archprobe.writers.synthetic import tiny_k3_dims, write_k3_checkpoint
    from tests.support.renamed_k3 import write_renamed_k3

    write_k3_checkpoint(tmp_path / "k3", tiny_k3_dims(), sparse=True)
    write_renamed_k3(tmp_path / "twin", tiny_k3_dims(), shards=1)
    d = diff_sources(str(tmp_path / "k3"), str(tmp_path / "twin"))
    t = d["tensors"]
    assert t["added"]["total"] == 0 and t["removed"]["total"] == 0 and t["changed"]["total"] == 0
    assert t["renamed"]["total"] > 100 and t["renamed"]["by_shape_fallback"] == 0
    assert all(r["by"] == "role" for r in t["renamed"]["items"])
    assert d["sizes"]["params"]["delta"] == 0 and d["sizes"]["bytes"]["delta"] == 0
    assert {r["path"] for r in d["card"]["items"]} == {"model_type", "architectures"}   # the twin's new names


def test_shape_fallback_for_tensors_no_role_explains():
    def t(shape, dtype="F32", role=None):
        return {"role": role, "shape": list(shape), "dtype": dtype, "count": 1}

    a = {"x.3.alpha": t((8, 4)), "x.3.beta": t((2,)), "x.4.alpha": t((8, 4)), "y.kept": t((1,))}
    b = {"x.3.gamma": t((8, 4)), "x.3.delta": t((2,), "F16"), "x.5.alpha": t((8, 4)), "y.kept": t((1,))}
    pairs = match_renames(a, b)
    # same layer, same shape and dtype: a rename; a dtype change or another layer index is not one
    assert [(p["a"], p["b"], p["by"]) for p in pairs] == [("x.3.alpha", "x.3.gamma", "shape+dtype in layer")]


def _gguf(path, quant=None):
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(L)
    w.add_embedding_length(H)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_context_length(512)
    w.add_feed_forward_length(FF)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    model = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}
    for hf, (_, shape) in _inventory().items():
        base = hf.removesuffix(".weight")
        if base in model:
            name = model[base]
        else:
            i, rest = base.removeprefix("model.layers.").split(".", 1)
            name = f"blk.{i}.{names[rest]}"
        data = np.zeros(shape, np.float32)
        if quant is not None and len(shape) == 2 and name.startswith("blk."):
            q = gguf.quants.quantize(data, quant)
            w.add_tensor(name + ".weight", q, raw_shape=q.shape, raw_dtype=quant)
        else:
            w.add_tensor(name + ".weight", data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def test_hf_against_its_gguf_conversion_matches_every_tensor_by_role(tmp_path):
    a = _write(tmp_path / "hf")
    g = _gguf(tmp_path / "m-f32.gguf")
    d = diff_sources(a, g)
    t = d["tensors"]
    assert t["added"]["total"] == 0 and t["removed"]["total"] == 0
    assert t["renamed"]["total"] == len(_inventory()) and t["renamed"]["by_shape_fallback"] == 0
    assert t["changed"]["total"] == 0                  # GGUF's F32 is F32
    assert d["sizes"]["params"]["delta"] == 0
    # GGUF keeps eps as float32 (1e-5 reads 9.99999974e-06): no difference; it has no activation key: one
    assert {r["path"] for r in d["card"]["items"]} == {"architectures"} | {f"layers.{i}.ffn.activation"
                                                                           for i in range(L)}
    # the same model quantized: every block matrix changes scheme, family by family, with its bytes
    d = diff_sources(g, _gguf(tmp_path / "m-q8.gguf", pytest.importorskip("gguf").GGMLQuantizationType.Q8_0))
    t = d["tensors"]
    assert t["renamed"]["total"] == t["added"]["total"] == t["removed"]["total"] == 0
    assert t["changed"]["total"] == 7 * L
    fams = {r["family"]: r for r in t["dtype_families"]}
    assert set(fams) == {f"layers.{{N}}.{x}" for x in ("mixer.q", "mixer.k", "mixer.v", "mixer.o", "ffn.gate",
                                                          "ffn.up", "ffn.down")}
    assert all(r["tensors"] == L and r["a"] == "F32" and r["bytes_b"] < r["bytes_a"] for r in fams.values())
    assert d["sizes"]["params"]["delta"] == 0 and d["sizes"]["bytes"]["delta"] < 0


def _cli(*args):
    r = invoke("diff", *args)
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit | None), (r.output, r.exception)
    return r


def test_cli_json_and_different_architectures(tmp_path):
    from archprobe.writers.synthetic import tiny_k3_dims, write_k3_checkpoint

    a = _write(tmp_path / "a")
    write_k3_checkpoint(tmp_path / "k3", tiny_k3_dims(), sparse=True)
    r = _cli(a, str(tmp_path / "k3"), "--json", "--limit", "5")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["schema"] == SCHEMA and d["identical"] is False
    assert d["summary"]["tensors_added"] > 0 and d["summary"]["params_delta"] > 0
    paths = {row["path"] for row in d["card"]["items"]}
    assert "model_type" in paths and len(d["card"]["items"]) == 5 and d["card"]["left_out"] == d["card"]["total"] - 5
    r = _cli(a, str(tmp_path / "k3"))       # the human form of the same pair
    assert r.exit_code == 0 and "Card:" in r.stdout and "Tensors:" in r.stdout
    r = _cli(a, a)
    assert r.exit_code == 0 and "no differences" in r.stdout
    assert json.loads(_cli(a, a, "--json").stdout)["identical"] is True


def test_cli_bad_source_is_one_line_exit_2(tmp_path):
    a = _write(tmp_path / "a")
    for args in ((a, str(tmp_path / "missing")), (str(tmp_path / "missing"), a)):
        r = _cli(*args, "--json")
        assert r.exit_code == 2 and r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 64)
    r = _cli(a, str(tmp_path / "junk.safetensors"))
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1


def test_hostile_names_render_inert(tmp_path):
    from archprobe.cli.render.diff import render_diff
    from archprobe.cli.textsafe import SafeConsole

    a = _write(tmp_path / "a")
    inv = _inventory() | {f"model.layers.0.{PAYLOAD}.weight": ("F32", (4, 4))}
    b = _write(tmp_path / "b", inv, _config(model_type=PAYLOAD, **{PAYLOAD: PAYLOAD}))
    out = io.StringIO()
    render_diff(diff_sources(a, b), console=SafeConsole(file=out, width=400, force_terminal=True))
    text = out.getvalue()
    assert "\x1b[2J" not in text and "\\x1b[2J" in text and "[/][bold red]" in text


def test_hub_revisions_and_a_local_copy(tmp_path, monkeypatch):
    from tests.support.hub_server import HubServer

    a = _write(tmp_path / "a")
    inv = _inventory()
    inv["lm_head.weight"] = ("BF16", inv["lm_head.weight"][1])
    b = _write(tmp_path / "b", inv)
    with HubServer() as server:
        server.add_repo("org/model", a)
        server.add_repo("mirror/model", b)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        d = diff_sources("org/model@main", a)          # the hub repo against a local copy of its files
        assert d["identical"] is True and d["a"]["kind"] == "hub" and d["a"]["revision"] == "main"
        d = diff_sources("org/model@main", "mirror/model@v2")
        assert [(r["a"], r["dtype"]) for r in d["tensors"]["changed"]["items"]] == [
            ("lm_head.weight", {"a": "F32", "b": "BF16"})]
        assert d["card"]["total"] == 0 and d["config"]["total"] == 0
        # headers only: no tensor data came over the wire
        data = (tmp_path / "a" / "model.safetensors").stat().st_size
        assert server.bytes_served(lambda p: p.endswith(".safetensors")) < data


def test_long_config_lists_are_compared_element_by_element(tmp_path):
    a = _write(tmp_path / "a", config=_config(layer_types=["full_attention"] * 40))
    plan = ["full_attention"] * 40
    plan[17] = "sliding_attention"
    d = diff_sources(a, _write(tmp_path / "b", config=_config(layer_types=plan)))
    assert d["config"]["changed"]["items"] == [{"key": "layer_types.17", "a": "full_attention",
                                                "b": "sliding_attention"}]


def test_a_real_gguf_model_against_itself_and_a_copy(tmp_path):
    import shutil

    from tests.support.real_models import smollm2_gguf

    real = smollm2_gguf()
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(real, copy)
    d = diff_sources(real, str(copy))
    assert d["identical"] is True and d["sizes"]["params"]["a"] > 100_000_000
    r = _cli(real, real)
    assert r.exit_code == 0 and "no differences" in r.stdout
