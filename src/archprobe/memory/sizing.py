"""Sizing: the plan spread over a layout of named devices under an engine's rules; the busiest device decides
the fit. Adds the contract's sizing fields to the `archprobe.memory/1` document: per_device, fits, the KV pool
an engine would leave, devices_needed, the largest fitting context (capped at the model's own maximum) and
bandwidth / compute bounds.
"""

from __future__ import annotations

import math

from archprobe.kinds.formulas import dtype_bytes
from archprobe.memory import layout as lay
from archprobe.memory.engines import Engine
from archprobe.memory.plan import MemoryPlanError, _activations, _model_dtype, _per_layer, card_of, plan_memory

SEARCH_CEILING = 1 << 24


def _mtp_layers(card) -> int:
    idx = set()
    for name in card.set_aside.get("mtp", []):
        nums = [p for p in name.split(".") if p.isdigit()]
        idx.add(nums[0] if nums else name)
    return len(idx)


class Sizer:
    """Everything about one model that does not change with context, so context searches stay cheap."""

    def __init__(self, doc: dict, *, weight_dtype=None, kv_dtype=None, state_dtype="float32", layout=None,
                 engine: Engine | None = None, device=None, memory_bytes: int | None = None, mtp: bool = False,
                 card=None, draft: Sizer | None = None, speculative_tokens: int | None = None):
        self.doc, self.card = doc, card_of(doc, card)
        self.draft = draft
        self.layout = layout or lay.Layout()
        self.engine, self.device, self.mtp = engine, device, mtp
        self.memory = memory_bytes if memory_bytes is not None else (device.memory_bytes if device else None)
        lay.check(self.card, self.layout, engine=engine.name if engine else None)
        model = _model_dtype(doc)
        try:
            self.kv_b = dtype_bytes(kv_dtype or model)
            self.act_b = dtype_bytes(model)
            self.state_b = dtype_bytes(state_dtype)
        except ValueError as exc:
            raise MemoryPlanError(str(exc)) from None
        self.kv_dtype, self.weight_dtype = kv_dtype or model, weight_dtype
        base = plan_memory(doc, 1, weight_dtype=weight_dtype, kv_dtype=kv_dtype, card=card)
        stored = sum(doc["storage"]["dtypes"].values()) or 1
        self.weight_scale = base["weights_bytes"] / stored
        self.weights_note = base["assumptions"][0]
        params = doc["params"]
        self.by_comp = dict(params.get("stored_bytes_by_component") or {"other": stored})
        self.by_layer = params.get("stored_bytes_by_layer") or [{} for _ in self.card.layers]
        self.mtp_count = _mtp_layers(self.card)
        # the target keeps that many lookahead slots per sequence while drafts are verified
        drafter = draft is not None or (mtp and self.mtp_count > 0)
        self.spec_tokens = (speculative_tokens or max(1, self.mtp_count)) if drafter else 0
        if not mtp:
            self.by_comp.pop("mtp", None)
        eng = engine.name if engine else None
        self.moe_group = (self.layout.tp * self.layout.dp if eng == "vllm"
                          else max(self.layout.ep, self.layout.tp))
        self.stages = lay.stages(len(self.card.layers), self.layout)
        self._stage_weights = [self._weights_of_stage(s) for s in range(self.layout.pp)]
        self._fixed_acts = self._engine_activations()

    # --- weights ------------------------------------------------------------------------------------
    def _weights_of_stage(self, s: int) -> int:
        share = lambda comp: lay.weight_share(comp, self.layout, self.moe_group)  # noqa: E731
        total = 0.0
        in_layers: dict[str, int] = {}
        for i, row in enumerate(self.by_layer):
            for comp, b in row.items():
                in_layers[comp] = in_layers.get(comp, 0) + b
                if i in self.stages[s]:
                    total += b * share(comp)
        first, last = s == 0, s == self.layout.pp - 1
        for comp, b in self.by_comp.items():
            rest = b - in_layers.get(comp, 0)
            if rest <= 0:
                continue
            where = {"embedding": first, "vision": first, "lm_head": last, "mtp": last, "norms": last,
                     "attn_res": last}.get(comp, True)
            if where:
                total += rest * share(comp)
        return int(total * self.weight_scale)

    # --- activations --------------------------------------------------------------------------------
    def _engine_activations(self) -> tuple[int, int, str] | None:
        e = self.engine
        if e is None or e.name != "vllm":
            return None
        peak, _ = _activations(self.doc, self.card, e.max_num_batched_tokens, e.max_num_batched_tokens, 1,
                               self.act_b, None)
        graph = 0
        if e.cuda_graph_tokens:
            graph, _ = _activations(self.doc, self.card, e.cuda_graph_tokens, e.cuda_graph_tokens, 1, self.act_b, None)
        return int(peak), int(graph), (f"vLLM profile: one forward of {e.max_num_batched_tokens:,} tokens; CUDA-graph "
                                       f"pool: the activations of a {e.cuda_graph_tokens}-token decode batch")

    # --- one context --------------------------------------------------------------------------------
    def stage_cache_per_sequence(self, T: int) -> list[float]:
        e = self.engine
        pad = e.block_size if e else 1
        rows = _per_layer(self.card, T, self.kv_b, self.act_b, self.state_b, None, pad=pad,
                          swa_extra_block=bool(e and e.swa_blocks_only))
        out = [0.0] * self.layout.pp
        stage_of = {i: s for s, r in enumerate(self.stages) for i in r}
        for i, kind, b in rows:
            layer = self.card.layers[i]
            pm = layer.parallel_mixer
            mixer = pm if pm is not None and kind == pm.kind and kind != layer.mixer.kind else layer.mixer
            out[stage_of[i]] += b * lay.cache_share(kind, mixer, self.layout)
        if self.mtp and self.mtp_count:     # each MTP layer keeps its own cache, like the last attention layer
            attn = [(i, k, b) for i, k, b in rows if k not in ("kda", "gated_deltanet", "mamba2", "mamba", "none")]
            if attn:
                i, kind, b = attn[-1]
                out[-1] += self.mtp_count * b * lay.cache_share(kind, self.card.layers[i].mixer, self.layout)
        return out

    def _draft_per_sequence(self, T: int) -> float:
        return sum(self.draft.stage_cache_per_sequence(T + self.spec_tokens)) if self.draft else 0.0

    def size(self, T: int, batch: int) -> dict:
        L = self.layout
        seqs = math.ceil(batch / L.dp)
        caches = self.stage_cache_per_sequence(T + self.spec_tokens)
        if self.draft:                  # the draft sits with the last pipeline stage, split by the same TP
            caches[-1] += self._draft_per_sequence(T)
        draft_w = sum(self.draft._stage_weights) if self.draft else 0
        fixed = self._fixed_acts
        per_device = []
        for d in range(L.dp):
            for s in range(L.pp):
                w = self._stage_weights[s] + (draft_w if s == L.pp - 1 else 0)
                c = int(caches[s] * seqs)
                if fixed:
                    acts, overhead = fixed[0], fixed[1]
                else:
                    acts, overhead = int(_activations(self.doc, self.card, min(T, 2048), T, seqs, self.act_b,
                                                      None)[0]), 0
                for t in range(L.tp):
                    per_device.append({"rank": (d * L.pp + s) * L.tp + t, "dp": d, "pp_stage": s, "tp_rank": t,
                                       "layers": [self.stages[s].start, self.stages[s].stop - 1]
                                       if len(self.stages[s]) else [],
                                       "weights_bytes": w, "cache_bytes": c, "activation_bytes": acts,
                                       "overhead_bytes": overhead, "peak_bytes": w + c + acts + overhead})
        busiest = max(per_device, key=lambda r: r["peak_bytes"])
        out = {"devices": L.devices, "layout": L.to_dict(), "per_device": per_device,
               "busiest_device_bytes": busiest["peak_bytes"]}
        if self.memory is not None:
            e = self.engine
            usable = int(self.memory * (e.memory_fraction if e else 1.0))
            out["usable_device_bytes"] = usable
            if e and e.fraction_covers == "static":
                need = busiest["weights_bytes"] + busiest["cache_bytes"]
            else:
                need = busiest["peak_bytes"]
            out["fits"] = need <= usable
            pool = usable - (need - busiest["cache_bytes"])
            out["kv_pool_bytes"] = max(0, int(pool))
            per_seq = max(caches) if caches else 0
            out["max_concurrency"] = round(L.dp * pool / per_seq, 2) if per_seq and pool > 0 else 0
        return out

    def fits(self, T: int, batch: int) -> bool:
        return self.size(T, batch).get("fits", False)

    def model_max(self) -> int | None:
        return self.card.max_position_embeddings

    def largest_fitting_context(self, batch: int) -> tuple[int | None, bool, str]:
        """(context, capped at the model's maximum, why)."""
        cap = self.model_max()
        high = cap or SEARCH_CEILING
        if not self.fits(1, batch):
            return None, False, "does not fit even at 1 token"
        if self.fits(high, batch):
            why = (f"capped at the model's maximum context ({cap:,} tokens, max_position_embeddings)" if cap else
                   f"fits at the search ceiling {SEARCH_CEILING:,}; the model declares no maximum")
            return high, bool(cap), why
        low = 1
        while high - low > 1:
            mid = (low + high) // 2
            if self.fits(mid, batch):
                low = mid
            else:
                high = mid
        return low, False, "the busiest device's peak reaches its usable memory beyond this"

    def assumptions(self) -> list[str]:
        L = self.layout
        out = [f"layout {L.describe()}: " + "; ".join([
            "attention weights and KV heads split by TP (KV heads replicated once TP exceeds them)",
            "MLA latent cache replicated on every TP rank" + (f", split over tokens by DCP{L.dcp}" if L.dcp > 1
                                                              else ""),
            "KDA / GDN / Mamba states split by heads over TP",
            f"routed experts over a group of {self.moe_group} rank(s)" + (" (whole experts, EP)" if L.ep > 1 else ""),
            "shared / dense FFN and latent projections split by TP; embedding and LM head vocabulary-split by TP on "
            "the first / last stage; router, norms and AttnRes queries replicated",
            f"PP stages of {[len(r) for r in self.stages]} layers" if L.pp > 1 else "one pipeline stage",
            f"DP{L.dp}: each replica holds its own sequences (batch / {L.dp})" if L.dp > 1 else "no data parallel"])]
        if self.engine:
            out += self.engine.rules
            if self._fixed_acts:
                out.append(self._fixed_acts[2])
        else:
            out.append("no engine: the full device memory is usable, no reserve")
        out.append("activations per device: not divided by TP (an upper estimate of the transients)")
        if self.draft:
            d = self.draft
            out.append(f"speculative decoding with a draft model ({d.doc.get('model_type') or 'draft'}, "
                       f"{sum(d._stage_weights):,} bytes of weights per rank): loaded on the last pipeline stage, "
                       f"split by TP{self.layout.tp} like the target, with its own cache of the context + "
                       f"{self.spec_tokens} draft token(s); the checkpoint's MTP layers are not loaded")
        if self.spec_tokens:
            out.append(f"speculative tokens {self.spec_tokens}: every sequence's cache holds that many lookahead "
                       "slots beyond the context")
        if self.mtp and not self.mtp_count:
            out.append("--mtp: the checkpoint has no MTP layers (none set aside as mtp); nothing added")
        if self.mtp_count and not self.draft:
            out.append(f"MTP: {self.mtp_count} checkpoint MTP layer(s) " + (
                "loaded, each with its own cache (speculative decoding on)" if self.mtp
                else "not loaded (speculative decoding off; --mtp counts their weights and cache)"))
        if self.device:
            out.append(f"device {self.device.label}: {self.device.source}")
        return out


def smallest_deployment(sizer_for, card, T: int, batch: int, max_devices: int = 1024):
    """The smallest device count (and its layout) whose busiest device fits: TP within a node of up to 8,
    then PP across nodes; `sizer_for(layout)` builds a Sizer."""
    heads = [m.num_heads for layer in card.layers for m in (layer.mixer, layer.parallel_mixer)
             if m is not None and m.num_heads]
    g = 0
    for h in heads:
        g = math.gcd(g, h)
    candidates = []
    for n in (1, 2, 4, 8):
        candidates.append(lay.Layout(tp=n))
    n = 16
    while n <= max_devices:
        candidates.append(lay.Layout(tp=8, pp=n // 8))
        n += 8
    for layout in candidates:
        if g and g % layout.tp:                            # heads the TP size does not divide: narrower TP, more PP
            tp = max(d for d in (1, 2, 4, 8) if g % d == 0)
            layout = lay.Layout(tp=tp, pp=layout.devices // tp)
        if layout.pp > len(card.layers):
            break
        try:
            s = sizer_for(layout)
        except lay.LayoutError:
            continue
        if s.fits(T, batch):
            return layout.devices, layout
    return None, None


def default_layout(card, devices: int) -> lay.Layout:
    """TP across up to 8 devices (one node) where the heads allow it, pipeline stages beyond."""
    g = 0
    for layer in card.layers:
        for m in (layer.mixer, layer.parallel_mixer):
            if m is not None and m.num_heads:
                g = math.gcd(g, m.num_heads)
    tp = max(d for d in range(1, min(devices, 8) + 1) if devices % d == 0 and (not g or g % d == 0))
    return lay.Layout(tp=tp, pp=devices // tp)


def sizing_document(doc: dict, context: int, batch: int = 1, *, weight_dtype=None, kv_dtype=None, gpu=None,
                    devices: int | None = None, budget: tuple[int, int] | None = None, tp=None, ep=None, pp=None,
                    dp=None, dcp=None, pp_layers=None, engine_name=None, engine_opts=None, mtp=False,
                    chunk=None, card=None, draft_doc: dict | None = None, speculative_tokens: int | None = None
                    ) -> dict:
    """The `archprobe.memory/1` plan with the contract's sizing fields: which device, how many, what layout,
    under which engine, and whether the busiest device fits."""
    from archprobe.memory.bounds import bounds
    from archprobe.memory.devices import device as find_device
    from archprobe.memory.engines import engine as make_engine

    card = card_of(doc, card)
    if draft_doc is not None and mtp:
        raise MemoryPlanError("--draft and --mtp both ask for speculative decoding; an engine runs one drafter",
                              hint="keep --draft SOURCE (a separate draft model) or --mtp (the checkpoint's own "
                                   "MTP layers), not both")
    if speculative_tokens and draft_doc is None and not mtp:
        raise MemoryPlanError("--speculative-tokens needs a drafter", hint="add --mtp or --draft SOURCE")
    dev = find_device(gpu) if gpu else None
    memory = None
    if budget is not None:
        count, memory = budget
        if devices is None and count > 1:
            devices = count
        elif devices is not None and count > 1 and count != devices:
            raise MemoryPlanError(f"--budget {count}x... and --devices {devices} disagree",
                                  hint="give the count once: --budget 8x141GB or --devices 8 --budget 141GB")
    device_bytes = memory if memory is not None else (dev.memory_bytes if dev else None)

    mtp_count = _mtp_layers(card)
    spec = (speculative_tokens or max(1, mtp_count)) if (draft_doc is not None or (mtp and mtp_count)) else 0

    def engine_for(L):
        return make_engine(engine_name, **(engine_opts or {}), device_memory_bytes=device_bytes,
                           device_name=dev.name if dev else "", tp=L.tp, pp=L.pp, speculative_tokens=spec)

    plan_engine = engine_name if engine_name in ("vllm", "llamacpp", "reference") else None
    out = plan_memory(doc, context, batch, weight_dtype=weight_dtype, kv_dtype=kv_dtype, engine=plan_engine,
                      chunk=chunk, card=card)
    given = [v for v in (tp, pp, dp) if v]
    if given and devices is not None:          # --devices 16 --tp 8: the one left out takes the rest (PP, else DP)
        known = (tp or 1) * (pp or 1) * (dp or 1)
        if devices % known == 0 and devices > known:
            if pp is None and not pp_layers:
                pp = devices // known
            elif dp is None:
                dp = devices // known
    need_search = dev is not None and devices is None and not given and memory is None
    if given:
        layout = lay.Layout(tp=tp or 1, ep=ep or 1, pp=pp or 1, dp=dp or 1, dcp=dcp or 1,
                            pp_layers=tuple(pp_layers) if pp_layers else None)
        if devices is not None:
            lay.check(card, layout, devices)
    elif devices:
        layout = default_layout(card, devices)
        layout.ep, layout.dcp = ep or 1, dcp or 1
    else:
        layout = lay.Layout(ep=ep or 1, dcp=dcp or 1)

    def draft_for(L):
        if draft_doc is None:
            return None
        try:
            return Sizer(draft_doc, weight_dtype=weight_dtype, kv_dtype=kv_dtype, layout=lay.Layout(tp=L.tp))
        except lay.LayoutError as exc:
            raise lay.LayoutError(f"the draft model: {exc.message}", hint=exc.hint) from None

    def sizer_for(L):
        return Sizer(doc, weight_dtype=weight_dtype, kv_dtype=kv_dtype, layout=L, engine=engine_for(L), device=dev,
                     memory_bytes=memory, mtp=mtp, card=card, draft=draft_for(L),
                     speculative_tokens=speculative_tokens)

    if need_search:
        n, found = smallest_deployment(sizer_for, card, context, batch)
        out["devices_needed"] = n
        if found is None:
            raise MemoryPlanError(f"no layout of up to 1,024 {dev.label} fits {context:,} tokens x batch {batch} "
                                  "(TP up to 8 per node, PP beyond)",
                                  hint="a larger device, a smaller --weight-dtype / --kv-dtype, or less --context")
        layout = found
    sizer = sizer_for(layout)
    eng = sizer.engine
    sized = sizer.size(context, batch)
    if "usable_device_bytes" in sized:
        heavy = max(sized["per_device"], key=lambda r: r["weights_bytes"])["weights_bytes"]
        if heavy > sized["usable_device_bytes"]:
            from archprobe.units import human_bytes

            per = (memory or dev.memory_bytes) * (eng.memory_fraction if eng else 1.0)
            n = math.ceil(sum(doc["storage"]["dtypes"].values()) * sizer.weight_scale / per)
            raise MemoryPlanError(f"the weights alone ({human_bytes(heavy)} on the busiest of {layout.devices} "
                                  f"device(s)) exceed the {human_bytes(sized['usable_device_bytes'])} usable per "
                                  "device", hint=(f"each of the DP{layout.dp} replicas holds the whole model: give "
                                                  f"it at least {n} devices (TP x PP), or a smaller --weight-dtype"
                                                  if layout.dp > 1 else
                                                  f"use at least {n} devices (--devices, or --gpu alone to find the "
                                                  "count), or a smaller --weight-dtype"))
    out.update(sized)
    out["device"] = ({"name": dev.name, "label": dev.label, "memory_bytes": memory or dev.memory_bytes,
                      "bandwidth_bytes_per_s": dev.bandwidth_bytes_per_s, "bf16_flops_per_s": dev.bf16_flops,
                      "fp8_flops_per_s": dev.fp8_flops, "source": dev.source} if dev else
                     ({"name": "budget", "memory_bytes": memory, "bandwidth_bytes_per_s": None,
                       "source": "--budget"} if memory else None))
    out["engine"] = eng.to_dict() if eng else None
    if "fits" in sized:
        fit_ctx, capped, why = sizer.largest_fitting_context(batch)
        out["largest_fitting_context"] = fit_ctx
        out["capped_at_model_max"] = capped
        out["largest_fitting_context_why"] = why
    per_seq = out["cache_bytes"] / batch                        # one sequence's cache, whole model
    out["bounds"] = bounds(doc, card, context, per_seq, dev, layout, sizer.weight_scale,
                           fp8=bool(weight_dtype and "8" in weight_dtype))
    out["assumptions"] = out["assumptions"][:-1] + sizer.assumptions()
    return out
