"""kinds/ is the one list of mixer and FFN kinds: every kind the card can produce has a label, a colour and
(where it is a mechanism of its own) a feature row; every mixer kind has every hook the stages read (feature
attrs, cache formula, validate fields, nn module, roles, detector), a decode test (tests/support/decode_configs.py) and
a zoo member whose card really holds it. The terminal, the report, the feature list, memory, validate and
the decoder read the registry, never lists of their own."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from archprobe import kinds
from archprobe.kinds.spec import CacheContext
from archprobe.structure.card import Ffn, Mixer
from archprobe.structure.features import MIXER_IDS, _mixer_attrs
from tests.support import zoo

SRC = Path(kinds.__file__).parents[1]

# the zoo member that carries each mixer kind (a transformers model, tests/support/zoo.py)
ZOO_MEMBER = {"gqa": "llama", "mha": "gpt2", "mqa": "falcon", "mla": "deepseek_v3", "moa": "jetmoe",
              "kda": "kimi_linear", "gated_deltanet": "qwen3_next", "lightning": "minimax", "mamba2": "bamba",
              "mamba": "mamba", "rg_lru": "recurrent_gemma", "short_conv": "lfm2", "rwkv": "rwkv"}
# kinds whose zoo member the card does not read as that kind yet, each with why (strict xfails: one that starts
# passing fails the run until it is taken off)
CARD_PENDING: dict[str, str] = {}
# kinds no transformers family produces today, each with why
NO_ZOO_MEMBER = {"lowrank_kv": "low-rank K/V without MLA's split: detected from shapes alone, no transformers "
                               "family ships it"}


def produced_kinds() -> set[str]:
    """Every `Mixer("kind"` / `Ffn("kind"` / `kind="..."` the structure package and the kinds' detectors write:
    what a card can hold."""
    found = set()
    for path in [*(SRC / "structure").glob("*.py"), *(SRC / "kinds").glob("*.py")]:
        text = path.read_text()
        found |= set(re.findall(r"\b(?:Mixer|Ffn)\(\s*(?:kind=)?\"([a-z0-9_]+)\"", text))
        found |= set(re.findall(r"\b(?:mixer|ffn|m|f)\.kind\s*=\s*\"([a-z0-9_]+)\"", text))
    return found


def test_every_kind_the_card_can_produce_is_in_the_registry():
    produced = produced_kinds()
    assert {"kda", "mla", "moa", "mamba2", "dense", "moe"} <= produced, produced   # the scan itself works
    missing = produced - set(kinds.ALL)
    assert not missing, f"kinds the card produces but kinds/ lacks: {sorted(missing)}"


def test_every_kind_has_a_label_a_colour_and_a_feature_row():
    for k in kinds.ALL.values():
        assert k.label and k.label != k.name or k.name == "dense", k
        assert re.fullmatch(r"#[0-9a-f]{6}", k.colour), k
    for name, k in {**kinds.MIXERS, **{n: f for n, f in kinds.FFNS.items() if n != "dense"}}.items():
        assert k.feature and re.fullmatch(r"[a-z_]+\.[a-z0-9_]+", k.feature), name
    assert len({k.colour for k in kinds.MIXERS.values()}) == len(kinds.MIXERS), "two mixer kinds share a colour"


def test_mixer_attrs_and_feature_ids_come_from_the_registry():
    assert MIXER_IDS == {n: k.feature for n, k in kinds.MIXERS.items()}
    assert MIXER_IDS["moa"] == "attention.moa"
    moa = Mixer("moa", num_heads=4, num_kv_heads=2, head_dim=16, num_experts=8, top_k=2)
    assert _mixer_attrs(moa, 64) == {"num_experts": 8, "top_k": 2, "num_heads": 4, "num_kv_heads": 2,
                                     "head_dim": 16}
    assert Ffn().kind in kinds.ALL and Mixer().kind in kinds.ALL


def test_every_mixer_kind_has_a_zoo_member():
    assert set(ZOO_MEMBER) | set(NO_ZOO_MEMBER) == set(kinds.MIXERS)
    assert not set(ZOO_MEMBER) & set(NO_ZOO_MEMBER)
    absent = {kind: name for kind, name in ZOO_MEMBER.items() if name not in zoo.ALL_MEMBERS}
    assert not absent, absent


def test_terminal_and_report_label_and_colour_every_mixer_kind():
    from archprobe.cli.render.inspect import compress_runs
    from archprobe.report.svg import color, legend

    for name, k in kinds.MIXERS.items():
        assert kinds.label(name) == k.label and color(name) == k.colour
        assert k.colour in legend([name])
    assert compress_runs([kinds.label("moa")] * 2) == "MoA×2"
    assert kinds.label("no_such_kind") == "no_such_kind"


HOOKS = ("feature", "attrs", "cache", "nn_kind", "fields", "build", "roles", "detect")


def test_every_mixer_kind_has_every_hook():
    missing = {name: [h for h in HOOKS if getattr(k, h) is None] for name, k in kinds.MIXERS.items()}
    missing = {name: hooks for name, hooks in missing.items() if hooks}
    assert not missing, f"mixer kinds without these hooks (kinds/<kind>.py): {missing}"
    assert {k.nn_kind for k in kinds.MIXERS.values()} <= set(kinds.BY_NN_KIND)


def test_mixer_detection_is_the_registrys_order():
    """structure/bind_mixer.py asks the kinds' detectors in `detect_order` and names no kind itself; two different
    detectors never share an order, so precedence is written down, not left to the kinds' names."""
    from archprobe.structure import bind_mixer

    text = inspect.getsource(bind_mixer)
    named = {k for k in kinds.MIXERS if re.search(rf"[\"']{k}[\"']", text)}
    assert not named, f"structure/bind_mixer.py names mixer kinds {sorted(named)}: give them a detect_order"
    detectors = kinds.mixer_detectors()
    assert set(detectors) == {k.detect for k in kinds.MIXERS.values()}
    orders = {}
    for k in kinds.MIXERS.values():
        orders.setdefault(k.detect_order, set()).add(k.detect)
    assert all(len(fs) == 1 for fs in orders.values()), {o: len(fs) for o, fs in orders.items()}
    assert [min(k.detect_order for k in kinds.MIXERS.values() if k.detect is f) for f in detectors] == sorted(orders)


def test_each_kinds_module_defines_what_it_registers():
    """One module per mechanism: every mixer kind, and every FFN kind beyond kinds/ffn.py's, comes from a kinds/
    module listed in MECHANISMS."""
    names = [k.name for m in kinds.MECHANISMS for k in m.KINDS]
    ffn_names = {k.name for k in kinds.ffn.KINDS}
    assert len(names) == len(set(names)) == len(kinds.MIXERS) + len(set(kinds.FFNS) - ffn_names)
    not_mechanisms = {"__init__", "spec", "ffn", "absent", "formulas"}
    modules = {p.stem for p in Path(kinds.__file__).parent.glob("*.py")} - not_mechanisms
    assert modules == {m.__name__.rsplit(".", 1)[1] for m in kinds.MECHANISMS}, "a kinds/ module not registered"


def test_memory_and_validate_have_no_per_kind_branches():
    """The stages ask the registry; a mixer kind's name written as a literal there is a list of their own."""
    from archprobe.memory import plan
    from archprobe.nn import decoder
    from archprobe.validate import plan as validate_plan

    bodies = {"memory/plan.py": inspect.getsource(plan),
              "validate/plan._layer_fields": inspect.getsource(validate_plan._layer_fields),
              "decoder._mixer": inspect.getsource(decoder._mixer),
              "decoder.HybridConfig.mixer_spec": inspect.getsource(decoder.HybridConfig.mixer_spec),
              "decoder.DecoderLayer": inspect.getsource(decoder.DecoderLayer.__init__)}
    for where, text in bodies.items():
        named = {k for k in kinds.MIXERS if re.search(rf"[\"']{k}[\"']", text)}
        assert not named, f"{where} names mixer kinds {sorted(named)}: read kinds/ instead"


def test_each_mixer_kinds_arguments_reach_its_module_without_a_hybrid_config_field(monkeypatch):
    """A mixer kind owns its module's arguments (kinds/<kind>.py's Args): its build hook sees those and the
    model-level ModelContext, never a HybridConfig, and an argument given under the kind's name in
    `HybridConfig.mixer_args` is the one the module is built with."""
    import dataclasses

    import torch

    from archprobe.kinds.spec import ModelContext
    from archprobe.nn import decoder

    seen = {}
    for name, k in kinds.MIXERS.items():
        assert dataclasses.is_dataclass(k.args) and k.args.__dataclass_params__.frozen, name
        assert list(inspect.signature(k.build).parameters) == ["a", "kind", "model"], name
        if k.nn_kind != name and k.nn_kind in seen:   # mha, mqa: GQA's builder, tried once
            continue

        def capture(args, kind, model, build=k.build):
            module = build(args, kind, model)
            seen[kind] = (args, model, module)
            return module

        monkeypatch.setitem(kinds.BY_NN_KIND, k.nn_kind, dataclasses.replace(k, build=capture))
        # one argument off its default: the first positive integer, doubled (heads, widths, kernels, experts)
        ints = [f for f in dataclasses.fields(k.args) if type(f.default) is int and f.default > 0]
        given = {ints[0].name: 2 * ints[0].default} if ints else {}
        cfg = decoder.HybridConfig(num_hidden_layers=1, mixer_types=(k.nn_kind,), ffn_types=("none",),
                                   mixer_args={kinds.BY_NN_KIND[k.nn_kind].name: given})
        model = decoder.HybridDecoder(cfg).eval()
        args, context, module = seen[k.nn_kind]
        assert args == k.args(**given) and type(context) is ModelContext, name
        assert context.hidden_size == cfg.hidden_size and context.norm_eps == cfg.rms_norm_eps, name
        assert model.layers[0].self_attn is module, name
        if given:   # the module read the doubled argument: its tensors differ from the defaults' module's
            default = k.build(k.args(), k.nn_kind, context)
            assert _shapes(default) != _shapes(module), (name, given)
        with torch.no_grad():
            assert model(torch.tensor([[1, 2, 3]])).shape == (1, 3, cfg.vocab_size), name
    assert set(seen) == {k.nn_kind for k in kinds.MIXERS.values()}


def _shapes(module) -> list:
    return sorted((n, tuple(t.shape)) for n, t in module.state_dict().items())


def test_every_cache_formula_answers_for_a_card_mixer():
    """Each kind's memory hook on a mixer of that kind with every width set: a size, growing with T for the
    caches that hold tokens (KV, latents) and constant for the recurrent states."""
    from archprobe.structure.card import Mixer

    widths = dict(num_heads=4, num_kv_heads=2, head_dim=16, value_head_dim=16, kv_lora_rank=16, rope_dim=8,
                  q_lora_rank=32, nope_dim=16, v_head_dim=16, conv_dim=64, conv_kernel=4, state_size=8, n_groups=1,
                  num_experts=4, top_k=2, cache_width_per_token=24)
    grows = {"gqa", "mha", "mqa", "mla", "lowrank_kv", "moa"}
    for name, k in kinds.MIXERS.items():
        m = Mixer(name, **{f: v for f, v in widths.items() if f in Mixer.__dataclass_fields__})
        short = k.cache(m, CacheContext(T=16, pad=1, kv_b=2, act_b=2, state_b=4))[1]
        long = k.cache(m, CacheContext(T=64, pad=1, kv_b=2, act_b=2, state_b=4))[1]
        assert short > 0, name
        assert (long > short) if name in grows else (long == short), name


def test_every_mixer_kind_has_a_decode_test():
    from tests.support.decode_configs import CONFIGS

    covered = set()
    for make in CONFIGS.values():
        cfg = make()
        covered |= set(cfg.mixer_types) | set(cfg.parallel_mixer_types)
    lacking = sorted(name for name, k in kinds.MIXERS.items() if k.nn_kind not in covered)
    assert not lacking, f"mixer kinds no decode test runs (tests/support/decode_configs.py): {lacking}"


@pytest.mark.needs_transformers
@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.xfail(reason=CARD_PENDING[k], strict=True))
                                  if k in CARD_PENDING else k for k in sorted(ZOO_MEMBER)])
def test_the_zoo_member_of_each_kind_holds_it(kind, zoo_root):
    """The member named for a kind is built by transformers and its card, derived by archprobe, has that kind."""
    pytest.importorskip("transformers")
    from archprobe.formats.sources import open_source
    from archprobe.structure.inspect import build_card

    card = build_card(open_source(str(zoo.build(ZOO_MEMBER[kind], zoo_root)))).card
    held = {layer.mixer.kind for layer in card.layers}
    held |= {layer.parallel_mixer.kind for layer in card.layers if layer.parallel_mixer is not None}
    assert kind in held, f"{ZOO_MEMBER[kind]}'s card holds {sorted(held)}, not {kind}"


def test_a_role_stored_as_a_bare_parameter_is_declared_bare():
    """validate looks for `<path>.weight` unless a role is bare (the kind's `bare_roles`; validate keeps no
    list of its own): a role whose path in the kind's built module is a Parameter itself must be declared, or a
    real checkpoint fails to load with the tensor reported missing."""
    from archprobe.kinds.spec import ModelContext

    undeclared = {}
    for name, k in kinds.MIXERS.items():
        assert set(k.bare_roles) <= set(k.roles), name
        module = k.build(k.args(), k.nn_kind, ModelContext(hidden_size=64))
        params = dict(module.named_parameters())
        bare = [role for role, path in k.roles.items() if path in params and role not in k.bare_roles]
        if bare:
            undeclared[name] = bare
    assert not undeclared, f"roles stored as bare Parameters but not in the Kind's bare_roles: {undeclared}"
