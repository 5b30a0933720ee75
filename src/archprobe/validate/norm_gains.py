"""Whether a norm's stored gains are applied as w or as (1 + w) where neither the config, the family tables
nor the user said.

Gemma, Qwen3-Next, MiniMax-M3 and Nemotron (LayerNorm1P) store a norm's gain as w = gain - 1 and apply
(1 + w); the headers cannot show it and the config has no key for it, so the card knows it from the family
tables by `model_type` (structure/family_defaults.py `norm_offset`, structure/norm_convention.py for the
plain families). A renamed or new family is decided here from every norm of the model at once, never from
one tensor (a trained model's single norm can average +0.001 and still be a plain gain):

- all stored gains 0: freshly initialised (1 + w); all 1: freshly initialised w (settled, no note);
- trained, at most `PLAIN_NEG` of all gain values negative: w (plain gains stay positive), printed as an
  assumption;
- trained, at least `OFFSET_NEG` negative and the mean within `CENTRED` of 0: (1 + w), printed likewise;
- anything between: the readings differ and nothing settles them, so validate stops with NeedsField.
"""

from __future__ import annotations

import copy

import torch

from archprobe.errors import CheckpointError
from archprobe.validate.plan import NeedsField

CENTRED = 0.25      # |mean gain| below this: zero-centred, as (1 + w) gains are
PLAIN_NEG = 0.10    # plain trained gains: few values below 0 (SmolLM2-135M: 2.3% of them)
OFFSET_NEG = 0.30   # (1 + w) gains: w spreads both sides of 0
CONSTANT = 1e-6


def _open_norms(card) -> list[tuple[str, object]]:
    """(card field, Norm) for every stored norm whose offset nobody set: the final norm and every layer's."""
    fields = ["final_norm"] + [f"layers.{i}.norm.{place}" for i, layer in enumerate(card.layers)
                               for place in layer.norm]
    out = []
    for field in fields:
        norm = card.get(field)
        if norm is not None and field in card.tensors and not norm.offset \
                and card.origin(f"{field}.offset") == "unknown":
            out.append((field, norm))
    return out


def check_norm_gains(card, get) -> tuple[object, list[str]]:
    """Settle the offset of every norm the card leaves open from the model's stored gains: (the card to run,
    the assumptions made, one line each), or NeedsField where the evidence is mixed. The settled offsets
    (origin `assumed`) go on a copy; `card` itself, which inspect and the report show, keeps its unknowns.
    `get`: name -> tensor, the reader's session."""
    open_norms = _open_norms(card)
    values = []
    for field, _ in open_norms:
        try:
            values.append(get(card.tensors[field]).detach().reshape(-1).to(torch.float64))
        except CheckpointError:    # a shard not fetched (hub --layers): the streaming step reports it
            continue
    if not values:
        return card, []
    w = torch.cat(values)
    if not w.numel():
        return card, []
    mean, neg = float(w.mean()), float((w < 0).double().mean())
    if float((w - 1).abs().max()) < CONSTANT:
        offset, note = False, None
    elif float(w.abs().max()) < CONSTANT:
        offset, note = True, f"assumed: norm gains applied as (1 + w): all {len(values)} norms store 0"
    elif neg <= PLAIN_NEG:
        offset, note = False, (f"assumed: norm gains applied as w (model_type {card.model_type!r} has no table "
                               f"row; {neg:.1%} of the {len(values)} norms' gains are negative, mean {mean:+.3f})")
    elif neg >= OFFSET_NEG and abs(mean) < CENTRED:
        offset, note = True, (f"assumed: norm gains applied as (1 + w) (model_type {card.model_type!r} has no "
                              f"table row; {neg:.1%} of the {len(values)} norms' gains are negative, "
                              f"mean {mean:+.3f})")
    else:
        raise NeedsField(f"{open_norms[0][0]}.offset",
                         f"across the {len(values)} norms, {neg:.1%} of stored gains are negative, mean "
                         f"{mean:+.3f}: true if the norms are applied as (1 + w), as Gemma and Qwen3-Next do; "
                         "false if as w")
    settled = copy.deepcopy(card)
    for field, _ in open_norms:
        settled.get(field).offset = offset
        settled.origins[f"{field}.offset"] = "assumed"
    return settled, [note] if note else []
