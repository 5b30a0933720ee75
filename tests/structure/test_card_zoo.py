"""The card on the model zoo (tests/support/zoo.py): tiny random checkpoints of many transformers families
saved by transformers itself, and renamed twins (every module path renamed, model_type unknown).

Must hold for each member: params.total equals the elements save_pretrained wrote (counted here with the
safetensors library, not with archprobe), every tensor is bound to exactly one role (none unexplained),
and memory plans it; each twin gets the same card as its original, names aside; and inspect, the card,
memory, adapt and report's collector agree on the layer plan.

KNOWN_GAPS lists the members the card does not fully explain yet, each with the reason; they are strict
xfails, so one that starts passing fails the run until it is taken off the list.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.needs_transformers

from archprobe import kinds  # noqa: E402
from archprobe.formats.sources import open_source  # noqa: E402
from archprobe.memory import plan_memory  # noqa: E402
from archprobe.structure.inspect import build_card, document  # noqa: E402
from tests.support import zoo as Z  # noqa: E402

KNOWN_GAPS = {
    "longcat_flash": "two attention and two MLP blocks per layer plus zero experts: one mixer/FFN per layer",
    "zamba2": "the shared transformer block (input 2H, LoRA adapters) beside Mamba-2 layers: unbound",
    "zamba": "Zamba-1's multi-head Mamba-1 (x_proj/dt_proj/A_log per mamba head, [heads, ...]) and its shared "
             "attention+MLP block on [hidden, embeddings] (2H) with a per-layer linear: unbound",
    "gemma3n": "Gemma-3n's AltUp streams (router, prediction/correction coefficients, stream projections), LAuReL "
               "low-rank residual and per-layer input embeddings: unbound",
    "inkling": "Inkling's short convolutions on the residual inputs and on k/v, relative-position logits (r_proj, "
               "rel_logits_proj) and its shared-expert routed FFN: unbound",
    "inkling2": "Inkling-2's attention residuals (attn_res queries), dynamic short convs, L2 clip scales and sink "
                "projection: unbound",
}
# frontier members (tests/support/zoo.py FRONTIER: exotic mechanisms) that the card already explains
FRONTIER_TAKEN = ["doge", "dory", "dots3_note", "kolibri1", "modernbert_decoder"]
MEMBERS = sorted(Z.MEMBERS) + [n for n in FRONTIER_TAKEN if n in getattr(Z, "FRONTIER", {})]
TWINS = sorted(Z.TWINS)
IGNORED = {"tensors", "unexplained", "model_type", "architectures", "origins", "warnings", "evidence", "confidence"}


def _param(names):
    return [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_GAPS[n], strict=True)) if n in KNOWN_GAPS else n
            for n in names]


@pytest.fixture(scope="module")
def derived(zoo):
    cache = {}

    def get(name):
        if name not in cache:
            raw = open_source(str(zoo[name]))
            d = build_card(raw)
            cache[name] = (raw, d, document(raw, d))
        return cache[name]
    return get


@pytest.mark.parametrize("name", _param(MEMBERS))
def test_member_fully_explained(name, zoo, derived):
    raw, d, doc = derived(name)
    card = d.card
    assert doc["params"]["total"] == Z.stored_elements(zoo[name]), doc["params"]
    assert card.unexplained == [], card.unexplained
    bound = Counter(card.tensors.values())
    assert [n for n, k in bound.items() if k > 1] == []           # one role per tensor
    stored = {t.name for h in raw.headers for t in h.tensors}
    assert stored <= set(bound) | set(card.set_aside["vision"]) | set(card.set_aside["mtp"])
    assert card.unknown_fields() == []
    plan = plan_memory(doc, 256)
    extra = [i for i, layer in enumerate(card.layers) if layer.parallel_mixer is not None]
    stateful_ffn = [i for i, layer in enumerate(card.layers)      # an FFN with a state (RWKV channel mixing)
                    if getattr(kinds.FFNS.get(layer.ffn.kind), "cache", None) is not None]
    assert [row["index"] for row in plan["per_layer"]] == list(range(len(card.layers))) + stateful_ffn + extra


def _flat(obj, path=""):
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k not in IGNORED:
                out.update(_flat(v, f"{path}.{k}" if path else k))
    elif isinstance(obj, list) and obj and isinstance(obj[0], dict):
        for i, v in enumerate(obj):
            out.update(_flat(v, f"{path}.{i}"))
    else:
        out[path] = obj
    return out


def _renamed(name: str, mapping: dict) -> str:
    """The twin's name for an original (possibly folded, `*`) tensor name."""
    if "*" not in name:
        return mapping[name]
    full = mapping[name.replace("*", "0", 1)].split(".")
    full[name.split(".").index("*") - len(name.split("."))] = "*"
    return ".".join(full)


@pytest.mark.parametrize("name", TWINS)
def test_twin_gets_the_same_card(name, zoo, derived):
    _, a, _ = derived(name)
    _, b, _ = derived(Z.twin_name(name))
    mapping = json.loads((zoo[Z.twin_name(name)].parent / "rename_map.json").read_text())
    defaults = {p for p, o in {**a.card.origins, **b.card.origins}.items() if o == "default"}  # by model_type
    fa, fb = _flat(a.card.to_dict()), _flat(b.card.to_dict())
    assert {p: (fa.get(p), fb.get(p)) for p in set(fa) | set(fb) if fa.get(p) != fb.get(p) and p not in defaults} == {}
    assert {r: _renamed(n, mapping) for r, n in a.card.tensors.items()} == b.card.tensors
    assert b.card.unexplained == []


@pytest.mark.parametrize("name", ["llama", "qwen3_moe", "deepseek_v3", "kimi_linear", "nemotron_h_moe", "gemma2",
                                  "qwen3_next", "gpt_oss", "phi", "falcon_h1", "jamba"])
def test_commands_agree_on_the_layer_plan(name, zoo):
    from archprobe.adapt.adapt import adapt
    from archprobe.report.collect import collect
    from archprobe.structure.inspect import inspect_checkpoint

    src = str(zoo[name])
    raw = open_source(src)
    card_plan = [[m, f] for _, m, f in build_card(raw).card.layer_plan()]
    doc = inspect_checkpoint(src)
    inspect_plan = [[layer["mixer"], layer["ffn"]] for layer in doc["layers"]]
    n = len(doc["layers"])
    memory_kinds = [row["kind"] for row in plan_memory(doc, 512)["per_layer"]][:n]   # then any parallel mixers
    adapt_plan = adapt(src, only=["archprobe"])["layer_plan"]
    report = collect(src, context="1k")
    report_plan = [[layer["mixer"], layer["ffn"]] for layer in report["inspect"]["layers"]]
    report_memory = [row["kind"] for row in report["memory"]["per_layer"]][:n]
    assert inspect_plan == card_plan == adapt_plan == report_plan == report["adapt"]["layer_plan"]
    windowed = {i for i, layer in enumerate(doc["card"]["layers"]) if layer["mixer"]["sliding_window"]}
    expected = ["sliding_window" if i in windowed else m for i, (m, _) in enumerate(card_plan)]
    assert memory_kinds == report_memory == expected
