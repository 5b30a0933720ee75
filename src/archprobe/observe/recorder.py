"""The streamed forward's recorder: what observe measures while validate's stream runs the model.

It attaches to each layer as the stream loads it (validate/stream.py's `observer`), through the
modules' own seams: MoE's `last_routing` and `expert_input` / `combine_output`, the layer's
`mixer_out` / `ffn_out`, the AttnRes pseudo-queries' `observer`, the linear-attention gates'
projections. Nothing is kept per layer but small statistics, so the stream's one-layer-resident memory
holds; only the stream entering the current layer is held (one [T, H] tensor). A wrapper refers to the
module it wraps (a reference cycle the garbage collector would free only later), so every wrapper is
taken off again when the next layer arrives: the stream's dropped layer is freed at once.
"""

from __future__ import annotations

import torch

from archprobe.formats.limits import MAX_ATTNRES_TOKENS as PER_TOKEN_CAP
from archprobe.observe import depth, horizons, routing


class Recorder:
    def __init__(self, starts: list[int]):
        self.starts = starts
        self.routing: list[dict] = []
        self.depth: list[dict] = []
        self.attnres: list[dict] = []
        self.horizons: list[dict] = []
        self.mla: list[dict] = []
        self.residual_weights: list[dict] = []
        self.gates: list[dict] = []
        self.embedding: torch.Tensor | None = None
        self.attnres_model = False
        self._before: torch.Tensor | None = None
        self._pending: dict | None = None    # AttnRes: a layer waits for what the next one reads
        self._sub: dict = {}
        self._patched: list[tuple[object, str]] = []

    def _patch(self, obj, attr: str, value) -> None:
        setattr(obj, attr, value)
        self._patched.append((obj, attr))

    def _unpatch(self) -> None:
        for obj, attr in self._patched:
            if attr == "observer":
                obj.observer = None
            else:
                obj.__dict__.pop(attr, None)
        self._patched.clear()

    # ---- the stream's observer protocol -------------------------------------------------------------
    def model(self, model) -> None:
        self.attnres_model = model.config.residual.startswith("attnres")
        if self.attnres_model:
            model.output_attn_res.observer = lambda sources: self._attnres(None, "output", model.output_attn_res,
                                                                           sources)

    def layer(self, i: int, layer) -> None:
        self._unpatch()
        self._sub = {}
        self._wrap_sublayers(i, layer)
        for mixer in (layer.self_attn, layer.parallel_mixer):
            if mixer is not None:
                self._watch_mixer(i, mixer)
        moe = getattr(layer, "block_sparse_moe", None)
        if moe is not None and hasattr(moe, "last_routing"):
            self._watch_moe(i, moe)
        if self.attnres_model:
            for site, point in (("attention", layer.self_attention_res), ("ffn", layer.mlp_res)):
                self._patch(point, "observer",
                            lambda sources, site=site, point=point: self._attnres(i, site, point, sources))
        self._residual_weights(i, layer)

    def output(self, i: int, h: torch.Tensor) -> None:
        out = {"layer": i, **self._sub, **{"massive": depth.massive(h)}}
        if self.attnres_model:       # closed when the next layer (or the output mix) reads the stream
            out["_before"] = self._before
            self._pending = out
            return
        if self._before is not None:
            out.update(depth.layer_depth(self._before, h))
        self.depth.append(out)
        self._before = None

    def finish(self) -> None:
        self._unpatch()
        if self._pending is not None:
            self._pending.pop("_before", None)
            self.depth.append(self._pending)
            self._pending = None

    # ---- depth -------------------------------------------------------------------------------------
    def _wrap_sublayers(self, i: int, layer) -> None:
        mixer_out, ffn_out = layer.mixer_out, layer.ffn_out

        def mixer_wrapped(x, cache, use_cache):
            a, c = mixer_out(x, cache, use_cache)
            if self.embedding is None and i == 0:
                self.embedding = x.detach()
            if self.attnres_model:
                self._close_pending(x)
            self._before = x.detach()
            if layer.self_attn is not None:
                self._sub["mixer_ratio"] = depth.ratio(a, x)
            return a, c

        def ffn_wrapped(x, pin_input=None):
            m = ffn_out(x, pin_input)
            if layer.ffn is not None:
                self._sub["ffn_ratio"] = depth.ratio(m, x)
            return m

        self._patch(layer, "mixer_out", mixer_wrapped)
        self._patch(layer, "ffn_out", ffn_wrapped)

    def _close_pending(self, after: torch.Tensor | None) -> None:
        """AttnRes: the previous layer's 'after' is the mixture the next reader sees."""
        if self._pending is None or after is None:
            return
        before = self._pending.pop("_before", None)
        if before is not None:
            self._pending.update(depth.layer_depth(before, after))
        self.depth.append(self._pending)
        self._pending = None

    def _residual_weights(self, i: int, layer) -> None:
        with torch.no_grad():
            if hasattr(layer, "attn_res_gate"):
                for site, w in (("attention", layer.attn_res_gate), ("ffn", layer.mlp_res_gate)):
                    f = w.float()
                    self.residual_weights.append({"layer": i, "site": site, "kind": "gated", "mean": float(f.mean()),
                                                  "min": float(f.min()), "max": float(f.max())})
            if hasattr(layer, "dwa_weights"):
                self.residual_weights.append({"layer": i, "site": "block", "kind": "depth_weights",
                                              "weights": [float(x) for x in layer.dwa_weights.float()]})

    # ---- AttnRes -----------------------------------------------------------------------------------
    def _attnres(self, i, site: str, point, sources: list[torch.Tensor]) -> None:
        from archprobe.ops.attnres import attn_res_weights

        with torch.no_grad():
            w = attn_res_weights(torch.stack(sources), point.query())       # [N, B, T]
            per_token = w.reshape(w.shape[0], -1)
            entry = {"layer": i, "site": site, "weights": per_token.mean(-1).tolist(),
                     "per_token": per_token[:, :PER_TOKEN_CAP].T.tolist()}
            self.attnres.append(entry)
            if site == "output" and self._pending is not None:
                mixed = torch.einsum("nt,ntd->td", per_token, torch.stack(sources).reshape(len(sources), -1,
                                                                                         sources[0].shape[-1]).float())
                self._close_pending(mixed)

    # ---- mixers ------------------------------------------------------------------------------------
    def _watch_gates(self, i: int, mixer) -> None:
        """Dynamic allocation: the share of KV entries an indexer keeps (of the causal ones) and the share
        of heads a head gate keeps (hard gates: heads on; soft and activation gates: mean multiplier)."""
        indexer = getattr(mixer, "indexer", None)
        if indexer is not None:
            select = indexer.select      # a method, not forward: wrapped, as the layer's seams are

            def picked(x, keys, causal, *args, **kwargs):
                out = select(x, keys, causal, *args, **kwargs)
                kept = float(out.sum()) / max(1.0, float(causal.expand_as(out).sum()))
                self.gates.append({"layer": i, "kind": "indexer", "topk": indexer.topk, "share_kept": kept,
                                   "kept_per_query": float(out.sum(-1).float().mean())})
                return out

            self._patch(indexer, "select", picked)
        gate = getattr(mixer, "gate", None)
        if gate is not None and hasattr(gate, "head_gate"):
            def heads(module, args, out):
                per_head = out.float().reshape(-1, out.shape[-1]).mean(0)
                self.gates.append({"layer": i, "kind": f"head_gate_{module.mode}", "share_kept": float(per_head.mean()),
                                   "per_head": per_head.tolist()})

            gate.register_forward_hook(heads)
        proj = getattr(mixer, "head_gate_proj", None)
        if proj is not None and hasattr(mixer, "head_gate_act"):
            def act_heads(module, args, out):
                g = mixer.head_gate_act(out.float())
                per_head = g.reshape(-1, g.shape[-1]).mean(0)
                self.gates.append({"layer": i, "kind": "head_gate_act", "share_kept": float(per_head.mean()),
                                   "per_head": per_head.tolist()})

            proj.register_forward_hook(act_heads)

    def _watch_mixer(self, i: int, mixer) -> None:
        kind = type(mixer).__name__
        self._watch_gates(i, mixer)
        rest = horizons.at_rest(mixer)
        if kind == "MultiHeadLatentAttention":
            self.mla.append({"layer": i, **horizons.spectrum(mixer.kv_b_proj.weight.detach())})
        if rest is None and kind not in ("KimiDeltaAttention", "GatedDeltaNet", "Mamba2Mixer"):
            return

        def pre(module, args):
            g = horizons.log_decay(module, args[0])
            if g is None:
                return
            for h, mean in enumerate(horizons.heads_from_log_decay(g)):
                entry = {"layer": i, "head": h, "mixer": kind, "tokens": horizons.half_life(mean),
                         "log_decay": mean, "source": "activations"}
                if rest is not None and h < len(rest):
                    entry["tokens_at_rest"] = horizons.half_life(rest[h])
                if g.dim() == 4:
                    ch = g[..., h, :].float().mean(dim=(0, 1))
                    entry["channels_longest"] = horizons.half_life(float(ch.max()))
                    entry["channels_shortest"] = horizons.half_life(float(ch.min()))
                self.horizons.append(entry)

        mixer.register_forward_pre_hook(pre)

    # ---- MoE ---------------------------------------------------------------------------------------
    def _watch_moe(self, i: int, moe) -> None:
        seen: dict = {}
        expert_input, combine_output = moe.expert_input, moe.combine_output

        def expert_input_wrapped(xf):
            z, r_in = expert_input(xf)
            seen["z"], seen["x"], seen["r_in"] = z, xf, r_in
            return z, r_in

        def combine_wrapped(y, xf):
            total = combine_output(y, xf)
            shared = None
            if hasattr(moe, "shared_experts"):
                shared = moe.shared_experts(xf)
            elif getattr(moe, "shared_gated", False):
                shared = torch.sigmoid(moe.shared_expert_gate(xf)) * moe.shared_expert(xf)
            if shared is not None:
                both = total * 2 if moe.shared_combine == "average" else total
                seen["routed_norm"] = float((both - shared).float().norm(dim=-1).mean())
                seen["shared_norm"] = float(shared.float().norm(dim=-1).mean())
            else:
                seen["routed_norm"] = float(total.float().norm(dim=-1).mean())
            return total

        def after(module, args, out):
            experts, _ = module.last_routing
            reach = routing.reachable(self._selection_scores(module, seen["r_in"]), module.top_k) \
                if "r_in" in seen else None
            stats = routing.routing_stats(experts, module.num_experts, self.starts, reach=reach)
            stats = {"layer": i, **stats, "routing_space": module.routing_space if module.latent_size else "hidden"}
            if "r_in" in seen:     # choices made from NaN scores say nothing about the router
                r_in = seen["r_in"]
                stats["nonfinite_tokens"] = int((~torch.isfinite(r_in.reshape(-1, r_in.shape[-1])).all(-1)).sum())
            for key in ("routed_norm", "shared_norm"):
                if key in seen:
                    stats[key] = seen[key]
            stats["other_space"] = self._other_space(module, seen, experts)
            self.routing.append(stats)
            seen.clear()

        self._patch(moe, "expert_input", expert_input_wrapped)
        self._patch(moe, "combine_output", combine_wrapped)
        moe.register_forward_hook(after)

    @staticmethod
    def _selection_scores(moe, r_in: torch.Tensor) -> torch.Tensor:
        """What the router ranks experts by: the score function of its logits plus the selection bias."""
        logits = moe.gate(r_in).float()
        bias = getattr(moe.gate, "e_score_correction_bias", None)
        if bias is not None and getattr(moe, "bias_on_logits", False):
            return logits + bias.float()
        s = torch.sigmoid(logits) if moe.score == "sigmoid" else logits   # softmax keeps the order of logits
        return s + bias.float() if bias is not None else s

    def _other_space(self, moe, seen: dict, actual: torch.Tensor) -> dict:
        """LatentMoE: the same statistics with routing recomputed in the other space. A router that reads
        the hidden state x is mapped onto the latent z = D x by least squares (W_lat = W D^+, the closest
        router to W that sees only z), which routes D^+ z, the part of x the latent keeps: "does routing on
        the latent change the statistics" is then measured. A latent router W reading z = D x is already
        the hidden router W D: its choices in the hidden space are the same, so nothing is recomputed."""
        if not moe.latent_size:
            return {"available": False, "why": "not a LatentMoE"}
        if moe.routing_space == "latent":
            return {"available": False, "why": "a latent router W over the linear down-projection D is the hidden "
                                               "router W D: the same choices in either space"}
        z = seen.get("z")
        if z is None:
            return {"available": False, "why": "the latent was not seen"}
        if not bool(torch.isfinite(z).all()):
            return {"available": False, "why": "the latent holds NaN/Inf"}
        down = getattr(moe, moe.latent_names[0]).weight.float()            # D [L, H]
        x_kept = torch.linalg.lstsq(down, z.float().reshape(-1, z.shape[-1]).T).solution.T   # D^+ z [N, H]
        _, experts = moe.route(x_kept.to(seen["x"].dtype))
        s = routing.routing_stats(experts, moe.num_experts, self.starts)
        same = (experts.sort(-1).values == actual.reshape(experts.shape).sort(-1).values).all(-1)
        return {"available": True, "space": "latent", "map": "least squares: W_lat = W pinv(D)",
                "same_choice_share": float(same.double().mean()),
                **{k: s[k] for k in ("imbalance", "entropy", "switch_rate", "top1_repeat",
                                     "topk_overlap", "distinct_per_block", "load")}}
