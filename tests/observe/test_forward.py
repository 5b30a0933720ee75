"""Known answers of the recorded forward on constructed models: random routing gives the random
baselines, a forced router gives imbalance E/k, an AttnRes query that selects the embedding gives weight 1
on source 0, a layer that adds nothing gives cosine 1, a KDA decay of g per step gives ln 2 / -g tokens."""

import math

import pytest
import torch

from archprobe.nn.decoder import HybridDecoder
from archprobe.nn.presets import tiny_k3, tiny_kimi_linear, variant
from archprobe.observe.recorder import Recorder
from archprobe.observe.routing import random_baselines, routing_stats


def _record(model, T=64, seed=0):
    """The recorder on an in-memory model, attached exactly as the stream attaches it."""
    rec = Recorder([0])
    rec.model(model)

    def layers():      # attached as each layer comes, as validate's stream does
        for i, layer in enumerate(model.layers):
            rec.layer(i, layer)
            yield layer

    ids = torch.randint(0, model.config.vocab_size, (1, T), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        model.hidden_states(model.embed(ids), layer_hook=rec.output, layers=layers())
    rec.finish()
    return rec


def test_uniform_random_routing_gives_random_baselines():
    E, k, N = 16, 2, 40000
    g = torch.Generator().manual_seed(1)
    experts = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(N)])
    s = routing_stats(experts, E)
    base = random_baselines(E, k)
    assert base["top1_repeat"] == 1 / 16
    assert base["topk_overlap"] == pytest.approx(1 - math.comb(14, 2) / math.comb(16, 2))
    assert s["top1_repeat"] == pytest.approx(base["top1_repeat"], abs=0.006)
    assert s["topk_overlap"] == pytest.approx(base["topk_overlap"], abs=0.01)
    assert s["imbalance"] < 1.05 and s["dead"] == [] and s["unselected"] == []


def test_pairs_across_texts_not_counted():
    experts = torch.tensor([[0], [0], [1], [1]])
    assert routing_stats(experts, 2, starts=[0, 2])["top1_repeat"] == 1.0
    assert routing_stats(experts, 2)["top1_repeat"] == pytest.approx(2 / 3)


def test_forced_router_gives_imbalance_e_over_k():
    torch.manual_seed(0)
    model = HybridDecoder(variant("baseline")).eval()
    for layer in model.layers:
        gate = layer.block_sparse_moe.gate
        with torch.no_grad():
            gate.weight.zero_()
            gate.e_score_correction_bias.zero_()
            gate.e_score_correction_bias[5] = 100.0     # chooses expert 5 for every token
    rec = _record(model, T=64)
    assert len(rec.routing) == 4
    for r in rec.routing:
        E, k = r["experts"], r["top_k"]
        assert r["load"][5] == 64
        assert r["imbalance"] == pytest.approx(E / k)
        assert r["top1_repeat"] == 1.0


def test_balanced_router_has_no_dead_experts():
    torch.manual_seed(0)
    rec = _record(HybridDecoder(variant("baseline")).eval(), T=512)
    assert all(r["dead"] == [] for r in rec.routing)


def test_attnres_query_selecting_embedding_weighs_source_zero():
    torch.manual_seed(0)
    cfg = tiny_k3(num_hidden_layers=4)
    model = HybridDecoder(cfg).eval()
    with torch.no_grad():
        model.embed_tokens.weight[:, 0] = 5.0              # every embedding carries channel 0
        for layer in model.layers:                         # no layer output writes channel 0
            layer.self_attn.o_proj.weight[0].zero_()
            ffn = layer.ffn
            out = ffn.down_proj if hasattr(ffn, "down_proj") else getattr(ffn, ffn.latent_names[1])
            out.weight[0].zero_()
            if hasattr(ffn, "shared_experts"):
                ffn.shared_experts.down_proj.weight[0].zero_()
            for point in (layer.self_attention_res, layer.mlp_res):
                point.proj.weight.zero_()
                point.proj.weight[0, 0] = 1e4
                point.norm.weight.fill_(1.0)
    rec = _record(model)
    assert rec.attnres, "no AttnRes mixture recorded"
    for entry in rec.attnres:
        if entry["layer"] is not None:
            assert entry["weights"][0] == pytest.approx(1.0, abs=1e-6)
            assert all(t[0] == pytest.approx(1.0, abs=1e-6) for t in entry["per_token"])


def test_layer_that_adds_nothing_has_cosine_one():
    torch.manual_seed(0)
    model = HybridDecoder(variant("baseline", ffn_types=("dense",) * 4)).eval()
    with torch.no_grad():
        model.layers[2].self_attn.o_proj.weight.zero_()
        model.layers[2].mlp.down_proj.weight.zero_()
    depth = _record(model).depth
    assert depth[2]["cosine_in_out"] == pytest.approx(1.0, abs=1e-6) and depth[2]["update_ratio"] == 0.0
    assert depth[1]["cosine_in_out"] < 0.999


def test_kda_decay_gives_the_half_life():
    g = math.log(0.9)                                        # the state keeps 90% per step
    torch.manual_seed(0)
    model = HybridDecoder(tiny_kimi_linear()).eval()
    with torch.no_grad():
        for layer in model.layers:
            m = layer.self_attn
            if type(m).__name__ == "KimiDeltaAttention":
                m.f_b_proj.weight.zero_()
                m.A_log.zero_()
                m.dt_bias.fill_(math.log(math.expm1(-g)))    # softplus(dt_bias) = -g
    rec = _record(model)
    assert rec.horizons
    expect = math.log(2) / -g                               # 6.58 tokens
    for h in rec.horizons:
        assert h["tokens"] == pytest.approx(expect, rel=1e-4)
        assert h["tokens_at_rest"] == pytest.approx(expect, rel=1e-4)


def test_indexer_keeps_topk_of_the_causal_entries():
    torch.manual_seed(0)
    model = HybridDecoder(variant("indexer")).eval()
    T, k = 64, model.config.layer_spec(0).mixer.args.index_topk
    gates = _record(model, T=T).gates
    assert [g["layer"] for g in gates] == [0, 1, 2, 3]
    expect = sum(min(k, t + 1) for t in range(T)) / sum(t + 1 for t in range(T))
    for g in gates:
        assert g["kind"] == "indexer" and g["share_kept"] == pytest.approx(expect)


def test_hard_head_gate_keeps_its_share_of_heads():
    torch.manual_seed(0)
    model = HybridDecoder(variant("head_gate")).eval()
    gates = _record(model).gates
    attention = model.config.layer_spec(0).mixer.args
    heads = attention.num_heads
    assert len(gates) == 4
    for g in gates:
        assert g["kind"] == "head_gate_hard" and len(g["per_head"]) == heads
        assert g["share_kept"] == pytest.approx(attention.head_gate_keep / heads)


def _latent_moes(model):
    return [m for m in model.modules() if type(m).__name__ == "MoE" and m.latent_size]


def test_latent_routing_recomputed_by_least_squares():
    """A hidden router whose rows lie in the latent's row space (W = M D) loses nothing on the latent: the
    least-squares latent router chooses exactly the same experts; a router with rows off that space does not."""
    torch.manual_seed(0)
    model = HybridDecoder(tiny_k3(num_hidden_layers=2)).eval()
    moes = _latent_moes(model)
    assert moes and all(m.routing_space == "hidden" for m in moes)
    with torch.no_grad():
        for m in moes:
            D = getattr(m, m.latent_names[0]).weight
            m.gate.weight.copy_(torch.randn(m.gate.weight.shape[0], D.shape[0]) @ D)
    inside = [r["other_space"] for r in _record(model, T=96).routing if r["routing_space"] == "hidden"
              and r["other_space"]["available"]]
    assert inside and all(o["same_choice_share"] == 1.0 for o in inside)
    torch.manual_seed(0)
    plain = [r["other_space"] for r in _record(HybridDecoder(tiny_k3(num_hidden_layers=2)).eval(), T=96).routing
             if r["other_space"]["available"]]
    assert plain and all(0.0 <= o["same_choice_share"] < 1.0 for o in plain)
    assert all(len(o["load"]) == len(plain[0]["load"]) and o["switch_rate"] is not None for o in plain)


def test_latent_router_needs_no_recomputation():
    torch.manual_seed(0)
    rec = _record(HybridDecoder(variant("latent_routing")).eval())
    assert rec.routing and all(not r["other_space"]["available"] and "same choices" in r["other_space"]["why"]
                               for r in rec.routing)


def test_latent_with_nan_is_not_rerouted():
    torch.manual_seed(0)
    model = HybridDecoder(tiny_k3(num_hidden_layers=2)).eval()
    with torch.no_grad():
        model.layers[0].self_attn.o_proj.weight[0, 0] = float("nan")
    rec = _record(model)
    assert rec.routing and all(r["nonfinite_tokens"] > 0 for r in rec.routing)
    assert all(r["other_space"] == {"available": False, "why": "the latent holds NaN/Inf"} for r in rec.routing
               if r["routing_space"] == "hidden")


def test_mla_spectrum_of_a_rank_r_up_projection():
    """kv_b_proj built from r orthonormal directions with equal singular values: 99% of the energy needs
    exactly r of them and the effective rank is r."""
    from archprobe.observe.horizons import spectrum

    g = torch.Generator().manual_seed(0)
    out, rank, r = 96, 24, 5
    u = torch.linalg.qr(torch.randn(out, r, generator=g)).Q
    v = torch.linalg.qr(torch.randn(rank, r, generator=g)).Q
    s = spectrum(u @ v.T)
    assert s["rank"] == rank and s["rank_99"] == r
    assert s["effective_rank"] == pytest.approx(r, rel=1e-4)
    full = spectrum(torch.linalg.qr(torch.randn(out, rank, generator=g)).Q)
    assert full["rank_99"] == rank and full["effective_rank"] == pytest.approx(rank, rel=1e-4)
