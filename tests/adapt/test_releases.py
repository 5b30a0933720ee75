"""`adapt`'s ecosystem view against a package-index stand-in and a forge stand-in, both real HTTP servers
on 127.0.0.1 that count the bytes they serve (tests/support/index_server.py)."""

from __future__ import annotations

import json
import struct
import time
import zipfile

import pytest

from archprobe.adapt import registries as reg
from archprobe.adapt.adapt import adapt
from archprobe.adapt.ecosystem import Ecosystem
from archprobe.adapt.releases import SPECS, Target, framework_releases
from archprobe.errors import SourceError
from archprobe.formats.http import GuardedHTTP
from archprobe.formats.pkgindex import ACCEPT
from tests.support import registry_excerpts as ex
from tests.support.cli import run
from tests.support.index_server import ForgeServer, IndexServer, build_wheel, gh_item
from tests.support.release_fixtures import REG, VLLM_OLD, populate, populate_forge


@pytest.fixture()
def servers(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path / "cache"))
    with IndexServer() as index, ForgeServer() as forge:
        populate(index)
        populate_forge(forge)
        monkeypatch.setenv("GITHUB_API_URL", forge.url)
        yield index, forge


def by_framework(doc: dict) -> dict:
    return {f["framework"]: f for f in doc["frameworks"]}


def test_releases_and_upstream_from_the_stand_ins(servers):
    index, forge = servers
    t0 = time.monotonic()
    doc = adapt(None, ecosystem=Ecosystem(index_url=index.url + "/simple"))
    took = time.monotonic() - t0
    fw = by_framework(doc)
    cells = {name: [(r["version"], r["status"], r["known_as"]) for r in fw[name]["releases"]]
             for name in ("vllm", "sglang", "transformers", "llama.cpp", "mlx-lm")}
    text_only = "registered for the wrapped text model only"
    assert cells["vllm"] == [("0.11.0", "registered", "KimiK3ForConditionalGeneration"),
                             ("0.10.0", text_only, "KimiLinearForCausalLM"), ("0.9.0", "not registered", None)]
    assert cells["sglang"] == [("0.5.0", text_only, "KimiLinearForCausalLM"), ("0.4.0", "not registered", None)]
    assert cells["transformers"] == [("4.57.0", text_only, "KimiLinearForCausalLM"),
                                     ("4.50.0", "not registered", None)]
    assert cells["llama.cpp"] == [("0.18.0", text_only, "kimi-linear"), ("0.17.0", "not registered", None)]
    assert cells["mlx-lm"] == [("0.30.0", text_only, "kimi_linear"), ("0.28.0", "not registered", None)]
    # only the checkpoint's own architecture counts for the first release; a wrapped text model does not
    assert fw["vllm"]["first_release_known"] == "0.11.0"
    assert all(fw[n]["first_release_known"] is None for n in ("sglang", "transformers", "llama.cpp", "mlx-lm"))
    assert fw["tensorrt-llm"]["releases"] == [] and fw["tensorrt-llm"]["first_release_known"] is None
    # features: the K3 model file mentions KDA, attnres, latent MoE; the KimiLinear file lacks attnres
    v11, v10 = fw["vllm"]["releases"][0], fw["vllm"]["releases"][1]
    assert {"linear_attention.kda", "residual.attnres", "moe.latent", "quant.mxfp4"} <= set(v11["handled"])
    assert "residual.attnres" in v10["missing"] and "linear_attention.kda" in v10["handled"]
    assert all(r["source"] == "index" for f in fw.values() for r in f.get("releases", []))
    assert fw["vllm"]["source"] == "installed"   # the installed probe stays, and says which it is
    # bytes: every release read through its directory and registry members only
    for f in fw.values():
        for r in f.get("releases", []):
            served = index.served.get(f"/files/{r['file']}", 0)
            assert served == r["bytes_fetched"] > 0
            assert served <= 0.02 * index.wheel_bytes(r["file"]), (r["file"], served, r["file_bytes"])
            assert r["file_bytes"] == index.wheel_bytes(r["file"])
    assert "/files/vllm-0.12.0rc1-py3-none-any.whl" not in index.served
    # upstream: states, three pages followed, one rate limit waited out (reset 1 s ahead, +1 s margin)
    up = {u["number"]: u for u in fw["vllm"]["upstream"]}
    assert sorted(up) == [101, 102, 103, 104, 105]
    assert (up[101]["kind"], up[101]["state"], up[101]["draft"], up[101]["merged"]) == ("pr", "open", True, False)
    assert (up[102]["state"], up[102]["merged"], up[102]["labels"]) == ("closed", True, ["new-model"])
    assert (up[103]["kind"], up[103]["state"]) == ("issue", "closed")
    assert (up[104]["merged"], up[105]["kind"], up[105]["state"]) == (False, "issue", "open")
    assert up[101]["url"] == "https://github.com/vllm-project/vllm/pull/101" and up[101]["repo"] == "vllm-project/vllm"
    assert sum("repo:vllm-project/vllm" in q for q in forge.queries) == 3
    assert "KimiK3ForConditionalGeneration" in forge.queries[0] and "kimi_linear" in forge.queries[0]
    assert took >= 1.0 and doc["ecosystem"]["warnings"] == []
    # a second run reads nothing of the wheels it has seen (cached per sha256)
    before = dict(index.served)
    again = adapt(None, ecosystem=Ecosystem(index_url=index.url + "/simple", upstream=False))
    assert {k: v for k, v in index.served.items() if k.startswith("/files/")} == \
        {k: v for k, v in before.items() if k.startswith("/files/")}
    assert [r["status"] for r in by_framework(again)["vllm"]["releases"]] == [c[1] for c in cells["vllm"]]


def test_previously_supported_and_transformers_backend(servers):
    index, _ = servers
    http = GuardedHTTP(None, {"Accept": ACCEPT})
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        def first(arch):
            got = framework_releases(http, index.url + "/simple", SPECS["vllm"], Target([arch], "x"), [], 5, pool)
            return {r["version"]: (r["status"], r["known_as"]) for r in got["releases"]}, got["first_release_known"]

        rows, first_known = first("Phi3SmallForCausalLM")
        assert rows["0.10.0"] == ("previously supported (last in 0.9.2)", "Phi3SmallForCausalLM")
        assert rows["0.9.0"] == ("not registered", None) and first_known is None
        rows, first_known = first("SmolLM3ForCausalLM")
        assert rows["0.10.0"] == ("via the transformers backend", "SmolLM3ForCausalLM") and first_known is None
        rows, first_known = first("LlamaForCausalLM")
        assert first_known == "0.9.0" and all(s == "registered" for s, _ in rows.values())


def test_first_release_is_bisected_beyond_the_newest(servers, tmp_path):
    index, _ = servers
    for minor in range(1, 8):   # 0.1 .. 0.3 without, 0.4 .. 0.7 with
        registry = ex.VLLM_REGISTRY if minor >= 4 else VLLM_OLD
        index.add("vllm", f"0.{minor}.0", {REG: registry}, pad_members=2)
    http = GuardedHTTP(None, {"Accept": ACCEPT})
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        got = framework_releases(http, index.url + "/simple", SPECS["vllm"], Target(["KimiLinearForCausalLM"], "k"),
                                 [], 2, pool)
    assert got["first_release_known"] == "0.4.0"
    assert len(got["releases"]) < 10 and any("bisect" in n for n in got["notes"])


def test_pep503_html_index(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path))
    with IndexServer(html=True) as index:
        populate(index)
        doc = adapt(None, only=["llama.cpp"], ecosystem=Ecosystem(index_url=index.url + "/simple", upstream=False))
    rel = by_framework(doc)["llama.cpp"]["releases"]
    assert [(r["version"], r["known_as"]) for r in rel] == [("0.18.0", "kimi-linear"), ("0.17.0", None)]


def test_real_registry_excerpts_parse():
    v = reg.vllm_registry(ex.VLLM_REGISTRY)
    assert v["native"]["KimiLinearForCausalLM"] == "kimi_linear" and "LlamaModel" in v["native"]
    assert v["backend"] == {"SmolLM3ForCausalLM": "transformers", "TransformersForCausalLM": "transformers"}
    assert v["previously"] == {"MotifForCausalLM": "0.10.2", "Phi3SmallForCausalLM": "0.9.2"}
    assert reg.entry_classes(ex.SGLANG_MODEL_FILE_TAIL) == ["KimiLinearForCausalLM"]
    assert reg.entry_classes("EntryClass = [Qwen2ForCausalLM, Qwen2Embed]\n") == ["Qwen2ForCausalLM", "Qwen2Embed"]
    t = reg.transformers_mappings(ex.TRANSFORMERS_MODELING_AUTO)
    assert t["MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"]["kimi_linear"] == ["KimiLinearForCausalLM"]
    assert "kimi_linear" in reg.transformers_mappings(ex.TRANSFORMERS_AUTO_MAPPINGS)["CONFIG_MAPPING_NAMES"]
    g = reg.gguf_constants(ex.GGUF_CONSTANTS)
    assert g["names"]["KIMI_LINEAR"] == "kimi-linear" and "SSM_CONV1D_Q" in g["tensors"]["KIMI_LINEAR"]
    assert reg.mlx_remapping(ex.MLX_UTILS)["kimi_k2"] == "deepseek_v3"
    src = '@register_auto_model("LlamaForCausalLM")\nclass LlamaForCausalLM(DecoderModelForCausalLM):\n    pass\n'
    assert reg.trtllm_registered(src) == ["LlamaForCausalLM"]
    assert reg.trtllm_model_map('MODEL_MAP = {"GPT2LMHeadModel": GPTForCausalLM}\n') == {"GPT2LMHeadModel"}


def test_the_installed_probe_registries_agree_with_the_wheel_readers():
    """The same parser reads the installed transformers and gguf sources as it reads wheels."""
    import os

    import gguf
    import transformers
    from transformers.models.auto import modeling_auto

    from archprobe.adapt.hf import _registered_architectures

    auto = os.path.join(os.path.dirname(transformers.__file__), "models", "auto", "modeling_auto.py")
    parsed = {c for table in reg.transformers_mappings(open(auto).read()).values() for v in table.values() for c in v}
    assert parsed == _registered_architectures(modeling_auto)
    consts = reg.gguf_constants(open(os.path.join(os.path.dirname(gguf.__file__), "constants.py")).read())
    assert set(consts["names"].values()) == set(gguf.MODEL_ARCH_NAMES.values())


def test_offline_is_one_line_and_the_installed_view(tmp_path):
    r = run("adapt", "--json", "--index-url", "http://127.0.0.1:9/simple", "-f", "transformers",
            env={"ARCHPROBE_CACHE": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("offline:"), r.stderr
    doc = json.loads(r.stdout)
    t = by_framework(doc)["transformers"]
    assert t["installed"] and t["source"] == "installed" and t["releases"] == [] and doc["ecosystem"]["offline"]


def test_a_far_rate_limit_says_when_to_retry_and_keeps_what_was_read(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path))
    with IndexServer() as index, ForgeServer(limit_at=1, wait_s=3600) as forge:
        populate(index)
        populate_forge(forge)
        monkeypatch.setenv("GITHUB_API_URL", forge.url)
        t0 = time.monotonic()
        doc = adapt(None, only=["vllm"], ecosystem=Ecosystem(index_url=index.url + "/simple"))
        assert time.monotonic() - t0 < 30
    warnings = doc["ecosystem"]["warnings"]
    assert any("retry after" in w and "kept" in w for w in warnings), warnings
    assert [u["number"] for u in by_framework(doc)["vllm"]["upstream"]] == [101, 102]   # page 1, kept


def test_retry_after_is_honoured(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path))
    with IndexServer() as index, ForgeServer(limit_once="retry-after", wait_s=1) as forge:
        populate(index)
        populate_forge(forge)
        monkeypatch.setenv("GITHUB_API_URL", forge.url)
        t0 = time.monotonic()
        doc = adapt(None, only=["vllm"], ecosystem=Ecosystem(index_url=index.url + "/simple"))
        assert time.monotonic() - t0 >= 1.0
    assert len(by_framework(doc)["vllm"]["upstream"]) == 5 and doc["ecosystem"]["warnings"] == []


# -- hostile answers ----------------------------------------------------------------------------
def _one_line_error(fn):
    with pytest.raises(SourceError) as info:
        fn()
    assert "\n" not in info.value.message
    return info.value.message


def test_hostile_huge_index_page(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path))
    monkeypatch.setenv("ARCHPROBE_MAX_PACKAGE_INDEX_BYTES", "200000")
    with IndexServer() as index:
        index.hooks["/simple/vllm/"] = lambda h: index.send(h, 200, b'{"files": [' + b'{"a": 1},' * 500_000 + b"{}]}",
                                                             {"Content-Type": "application/vnd.pypi.simple.v1+json"})
        msg = _one_line_error(lambda: adapt(None, only=["vllm"], ecosystem=Ecosystem(index.url + "/simple",
                                                                                    upstream=False)))
    assert "cap" in msg
    assert index.served.get("/simple/vllm/", 0) == 0   # refused on its Content-Length, unread


def test_hostile_endless_pagination_stops(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path))
    with IndexServer() as index, ForgeServer(limit_once=None) as forge:
        populate(index)
        repo = "vllm-project/vllm"
        page = json.dumps({"total_count": 10**9, "items": [gh_item(repo, 1, "t", "pr")]}).encode()
        forge.hooks["/search/issues"] = lambda h: forge.send(
            h, 200, page, {"Link": f'<{forge.url}/search/issues?page=2>; rel="next"'})
        monkeypatch.setenv("GITHUB_API_URL", forge.url)
        doc = adapt(None, only=["vllm"], ecosystem=Ecosystem(index_url=index.url + "/simple"))
    assert any("stopped after 10 pages" in w for w in doc["ecosystem"]["warnings"])
    assert len(forge.requests) == 10


def _patch_directory_offset(data: bytes, member: str, offset: int) -> bytes:
    """The wheel with `member`'s central-directory entry pointing at `offset` (a lying directory)."""
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        nlen = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46: pos + 46 + nlen].decode() == member:
            return data[:pos + 42] + struct.pack("<I", offset) + data[pos + 46:]
        pos = data.find(b"PK\x01\x02", pos + 4)
    raise AssertionError(member)


@pytest.mark.parametrize("offset, words", [(0, "names another member"), (10**8, "lies about its offsets")])
def test_hostile_directory_that_lies_about_offsets(tmp_path, monkeypatch, offset, words):
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path))
    with IndexServer() as index:
        name, data = build_wheel("vllm", "1.0.0", {REG: ex.VLLM_REGISTRY})
        index.projects["vllm"] = [(name, _patch_directory_offset(data, REG, offset))]
        msg = _one_line_error(lambda: adapt(None, only=["vllm"], ecosystem=Ecosystem(index.url + "/simple",
                                                                                    upstream=False)))
    assert words in msg


def test_hostile_member_compressed_1000_to_1(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path))
    with IndexServer() as index:
        index.add("gguf", "1.0.0", {"gguf/constants.py": "#" * (8 * 1024 * 1024)}, pad_members=1)
        t0 = time.monotonic()
        msg = _one_line_error(lambda: adapt(None, only=["llama.cpp"], ecosystem=Ecosystem(index.url + "/simple",
                                                                                         upstream=False)))
        assert time.monotonic() - t0 < 20
    assert "zip bomb" in msg and index.served["/files/gguf-1.0.0-py3-none-any.whl"] < 100_000


def test_hostile_answer_through_the_cli_is_one_line(tmp_path):
    with IndexServer() as index:
        index.hooks["/simple/gguf/"] = lambda h: index.send(h, 200, b"{not json", {"Content-Type": "application/json"})
        r = run("adapt", "-f", "llama.cpp", "--no-upstream", "--index-url", index.url + "/simple",
                env={"ARCHPROBE_CACHE": str(tmp_path)})
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


def test_wheel_zip_is_real(tmp_path):
    name, data = build_wheel("vllm", "1.0.0", {REG: "x = 1\n"})
    (tmp_path / name).write_bytes(data)
    with zipfile.ZipFile(tmp_path / name) as z:
        assert z.read(REG) == b"x = 1\n" and len(data) > 1_000_000


def test_report_draws_the_release_timeline_and_feature_table(servers):
    from archprobe.report.collect import collect
    from archprobe.report.html import render

    index, forge = servers
    forge.items["vllm-project/vllm"].append({**gh_item("vllm-project/vllm", 106, "<script>x</script>", "issue"),
                                              "html_url": "javascript:alert(1)"})
    data = collect(None, ecosystem=Ecosystem(index_url=index.url + "/simple"))
    page = render(data)
    assert "<section id=releases>" in page and "id='releases-vllm'" in page
    timeline = page[page.index("id='releases-vllm'"):]
    assert timeline.index("data-version='0.9.0'") < timeline.index("data-version='0.11.0'")   # oldest first
    assert "first release that knows it: 0.11.0" in page
    assert "javascript:" not in page and "<script>x" not in page


def test_a_server_that_ignores_range_is_refused_not_streamed(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path))
    with IndexServer() as index:
        name = index.add("gguf", "1.0.0", {"gguf/constants.py": ex.GGUF_CONSTANTS})
        data = index.projects["gguf"][0][1]
        index.hooks[f"/files/{name}"] = lambda h: index.send(h, 200, data)
        msg = _one_line_error(lambda: adapt(None, only=["llama.cpp"], ecosystem=Ecosystem(index.url + "/simple",
                                                                                         upstream=False)))
    assert "does not answer Range" in msg


def test_the_json_api_when_the_simple_page_is_missing(tmp_path, monkeypatch):
    import hashlib

    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path))
    with IndexServer() as index:
        populate(index)
        files = index.projects["gguf"]
        api = {"info": {"name": "gguf"}, "releases": {n.split("-")[1]: [
            {"filename": n, "url": f"/files/{n}", "digests": {"sha256": hashlib.sha256(d).hexdigest()},
             "size": len(d), "packagetype": "bdist_wheel", "yanked": False}] for n, d in files}}
        index.hooks["/simple/gguf/"] = lambda h: index.send(h, 404, b"no")
        index.hooks["/pypi/gguf/json"] = lambda h: index.send(h, 200, json.dumps(api).encode(),
                                                               {"Content-Type": "application/json"})
        doc = adapt(None, only=["llama.cpp"], ecosystem=Ecosystem(index_url=index.url + "/simple", upstream=False))
    assert [r["version"] for r in by_framework(doc)["llama.cpp"]["releases"]] == ["0.18.0", "0.17.0"]


def test_merged_state_from_the_pull_when_the_hit_lacks_merged_at(tmp_path, monkeypatch):
    from archprobe.formats.forge import forge_headers, search

    repo = "sgl-project/sglang"
    with ForgeServer(limit_once=None) as forge:
        forge.items[repo] = [gh_item(repo, 7, "KimiLinear", "pr", state="closed", merged=True, without_merged_at=True),
                             gh_item(repo, 8, "KimiLinear v2", "pr", state="closed", without_merged_at=True)]
        got = search(GuardedHTTP(None, forge_headers()), forge.url, repo, ["KimiLinearForCausalLM"])
    assert [(i["number"], i["merged"]) for i in got.items] == [(7, True), (8, False)]
    assert all("_merged_unknown" not in i for i in got.items)


def test_hostile_huge_forge_answer_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHPROBE_CACHE", str(tmp_path))
    monkeypatch.setenv("ARCHPROBE_MAX_FORGE_BYTES", "100000")
    with IndexServer() as index, ForgeServer(limit_once=None) as forge:
        populate(index)
        forge.hooks["/search/issues"] = lambda h: forge.send(h, 200, b'{"items": [' + b"1," * 2_000_000 + b"1]}")
        monkeypatch.setenv("GITHUB_API_URL", forge.url)
        msg = _one_line_error(lambda: adapt(None, only=["vllm"], ecosystem=Ecosystem(index.url + "/simple")))
    assert "cap" in msg and "upstream" in msg
