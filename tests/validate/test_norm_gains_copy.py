"""check_norm_gains settles open norm offsets on its own copy of the card: the caller's card (the one
inspect, card and the report show) keeps its unknowns, and the settled copy is what validate runs."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from archprobe.demo import demo_checkpoint  # noqa: E402
from archprobe.structure.checkpoint import open_checkpoint  # noqa: E402
from archprobe.validate.norm_gains import _open_norms, check_norm_gains  # noqa: E402


def _card_with_open_norms():
    """The demo's card with every stored norm's offset made unknown (as a family without a table row)."""
    card = open_checkpoint(str(demo_checkpoint())).card
    fields = ["final_norm"] + [f"layers.{i}.norm.{p}" for i, layer in enumerate(card.layers) for p in layer.norm]
    for field in fields:
        if card.get(field) is not None and field in card.tensors:
            card.get(field).offset = False
            card.origins[f"{field}.offset"] = "unknown"
    return card


def test_the_callers_card_is_left_as_it_was():
    card = _card_with_open_norms()
    opened = [f for f, _ in _open_norms(card)]
    assert len(opened) > 3
    before = copy.deepcopy(card.to_dict())

    def zeros(name):       # freshly initialised (1 + w) gains: all stored values 0
        return torch.zeros(4)

    settled, notes = check_norm_gains(card, zeros)
    assert card.to_dict() == before and [f for f, _ in _open_norms(card)] == opened
    assert settled is not card and not _open_norms(settled)
    assert all(settled.get(f).offset is True and settled.origin(f"{f}.offset") == "assumed" for f in opened)
    assert len(notes) == 1 and "(1 + w)" in notes[0]


def test_nothing_open_returns_the_same_card_and_no_note():
    card = _card_with_open_norms()
    for field, _ in _open_norms(card):
        card.set(f"{field}.offset", False)      # as a user's card says
    assert not _open_norms(card)
    settled, notes = check_norm_gains(card, lambda name: torch.ones(4))
    assert settled is card and notes == []
