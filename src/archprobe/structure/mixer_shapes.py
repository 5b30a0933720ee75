"""Shape helpers the mixer kinds' detectors share (each kind's `detect` in kinds/<kind>.py): vectors stored
with unit dims, depthwise convolutions and the layers built around them, the writer of a one-conv layer,
binding roles out of a layer's pool, and the output gate and DSA indexer any attention may carry. One
owner each, so two detectors never disagree on what a conv or a per-head vector is."""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.structure.bind_ffn import Bound, ev
from archprobe.structure.modules import Module
from archprobe.structure.names import rank, says
from archprobe.structure.widths import mat


def vec_len(m: Module) -> int | None:
    """The length of a vector stored with extra unit dims ([1, 1, n, 1] -> n); None for other shapes."""
    big = [d for d in m.shape if d != 1]
    return big[0] if len(big) == 1 and len(m.shape) >= 1 else (1 if m.shape and not big else None)


def take(pool: list[Module], m: Module | None) -> Module | None:
    """`m`, taken out of the layer's pool (if it is there): a module binds one role only."""
    if m is not None and m in pool:
        pool.remove(m)
    return m


def bind_roles(b: Bound, pool: list[Module], pairs) -> None:
    """Bind each (role, module) pair whose module is present, taking it out of the layer's pool."""
    for role, m in pairs:
        if take(pool, m) is not None:
            b.roles[role] = m


def output_projection(cands: list[Module]) -> Module | None:
    """The output projection among the [H, W] matrices shapes leave: where an output gate [W, H] has the same
    shape (W = H, as in the demo's Gated MLA), names break the tie: an output's words first, a gate's last."""
    return min(cands, key=lambda m: (says(m.path, "output_gate"), not says(m.path, "mixer_out"), m.path),
               default=None)


def depthwise_convs(mods: list[Module]) -> list[Module]:
    """The depthwise convolutions [C, 1, K] (C, K > 1): the mark of linear attention and SSM layers. Softmax
    attention has none, so its detectors leave a layer with them to the conv kinds."""
    return [m for m in mods if len(m.shape) == 3 and m.shape[1] == 1 and m.shape[0] > 1 and m.shape[2] > 1]


@dataclass
class ConvLayer:
    """A layer with depthwise convolutions as the conv kinds read it: the convs, the vectors beside them
    (unit dims allowed), the matrices, and the pool their roles are taken from."""

    convs: list[Module]
    vecs: list[Module]
    mats: list[Module]
    pool: list[Module]


def conv_layer(mods: list[Module]) -> ConvLayer | None:
    """The layer's convs, vectors and matrices; None without a depthwise conv."""
    convs = depthwise_convs(mods)
    if not convs:
        return None
    pool = list(mods)
    vecs = [m for m in pool if vec_len(m) is not None and mat(m) is None and m not in convs]
    mats = [m for m in pool if len(m.shape) == 2 and m not in vecs]
    return ConvLayer(convs, vecs, mats, pool)


def one_conv_layer(mods: list[Module]) -> ConvLayer | None:
    """A layer whose inputs go through one conv (the first of two): RG-LRU, Mamba, Mamba-2, Gated DeltaNet,
    a short-conv block. Three or more convs are q / k / v convs (KDA, OLMo-hybrid's Gated DeltaNet): None."""
    layer = conv_layer(mods)
    return layer if layer is not None and len(layer.convs) < 3 else None


def one_conv_writer(mats: list[Module], H: int) -> Module | None:
    """The writer of a one-conv layer: it maps some inner width back to H (a low-rank pair's up-projection,
    [X, r] beside [r, H], is not it); at width H the [H, H] matrix names call the output."""
    return next((m for m in mats if m.shape[0] == H and m.shape[1] != H
                 and not any(r.shape == (m.shape[1], H) for r in mats)), None) or next(
        iter(rank([m for m in mats if m.shape == (H, H)], "mixer_out")), None)


def vectors_by_length(vecs: list[Module]) -> dict[int, list[Module]]:
    sizes: dict[int, list[Module]] = {}
    for v in vecs:
        sizes.setdefault(vec_len(v), []).append(v)
    return sizes


def head_vector_groups(vecs: list[Module], C: int) -> tuple[list[Module] | None, list[Module] | None]:
    """(three or more, exactly two) vectors of one length below the conv width C: per-head parameters. Three
    (A_log, D, dt_bias) are Mamba-2's, two (A_log, dt_bias) Gated DeltaNet's."""
    sizes = vectors_by_length(vecs)
    triple = next((v for n, v in sizes.items() if len(v) >= 3 and n < C), None)
    pair = next((v for n, v in sizes.items() if len(v) == 2 and n < C), None)
    return triple, pair


def gates_and_indexer(b: Bound, pool: list[Module], H: int, nh: int | None, o: Module | None) -> None:
    """What any attention (softmax or MLA) may carry beside its projections: an output gate [Wo, H], a per-head
    gate [heads, H], and DSA's lightning indexer (modules named as one)."""
    mixer = b.part
    gate = next((m for m in pool if len(m.shape) == 2 and m.shape[1] == H and o is not None
                 and m.shape[0] == o.shape[1] and not says(m.path, "indexer")), None)
    if gate is not None and mixer.output_gate is None:
        b.roles["g"] = take(pool, gate)
        mixer.output_gate = "sigmoid_g_proj"
        mixer.evidence.append(ev(gate, f"[{gate.shape[0]}, H] beside the output projection: a gate on the "
                                       "attention output"))
    hg = next((m for m in pool if nh and m.shape == (nh, H) and not says(m.path, "indexer")), None)
    if hg is not None:
        b.roles["head_gate"] = take(pool, hg)
        mixer.layout["head_gate"] = list(hg.shape)
    idx = [m for m in pool if says(m.path, "indexer")]
    if idx:
        # DSA: a key norm [d] (+ bias), the key projection [d, H] beside it, per-head weights [heads, H], and the
        # query projection [heads * d, latent] that reads something narrower than H (the q-LoRA latent)
        mixer.indexer = {"index_topk": None, "index_heads": None, "index_dim": None}
        norm = next((m for m in idx if len(m.shape) == 1), None)
        d = norm.shape[0] if norm is not None else None
        wk = next((m for m in idx if d and m.shape == (d, H)), None)
        wts = next((m for m in idx if len(m.shape) == 2 and m.shape[1] == H and m is not wk), None)
        wq = next((m for m in idx if len(m.shape) == 2 and m.shape[1] != H), None)
        if wts is not None and wq is not None and d and wq.shape[0] == wts.shape[0] * d:
            mixer.indexer.update(index_heads=wts.shape[0], index_dim=d)
            for role, m in (("wq_b", wq), ("wk", wk), ("k_norm", norm), ("weights_proj", wts)):
                b.roles[f"indexer.{role}"] = take(pool, m)
        for m in [m for m in idx if m in pool]:      # a layout the shapes do not explain keeps its leaf
            b.roles[f"indexer.{m.path.split('indexer.', 1)[-1]}"] = take(pool, m)
