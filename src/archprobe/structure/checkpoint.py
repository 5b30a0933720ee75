"""One opened checkpoint, passed down: open once, derive once.

`open_checkpoint` reads the source's config and headers (formats/, a `RawCheckpoint`), derives the card
once (structure/derive.py) and lays the user's `--card` over it. inspect, memory, adapt, validate,
observe and report take the `Checkpoint` the CLI built, so every view reads the same card, the user's
corrections included, and a report that also validates derives nothing twice. It is also the one place
that decides "no source means the embedded demo".
"""

from __future__ import annotations

from dataclasses import dataclass

from archprobe.formats.checkpoint import Progress, RawCheckpoint
from archprobe.structure.card import Card
from archprobe.structure.derive import Derived, derive


@dataclass
class Checkpoint:
    """What the files say (`raw`) and what the model is (`derived`: the card, user fields applied)."""

    source: str                 # as given, or the demo's folder
    raw: RawCheckpoint
    derived: Derived
    user_card: Card | None = None

    @property
    def card(self) -> Card:
        return self.derived.card


def build_card(raw: RawCheckpoint, card: Card | None = None) -> Derived:
    """The derived card for `raw`; a user `card` (from `--card`) is checked against the shapes and applied."""
    d = derive(raw)
    if card is not None:
        from archprobe.structure.user_card import apply_user_card

        d.card = apply_user_card(d.card, card, d)
    return d


def open_checkpoint(source: str | None, card: Card | None = None, progress: Progress | None = None) -> Checkpoint:
    """Open `source` (folder, .safetensors/.gguf file, hub `org/name[@rev]`; None: the demo) and derive its card."""
    from archprobe.formats.sources import open_source

    if source is None:
        from archprobe.demo import demo_checkpoint

        source = str(demo_checkpoint())
    raw = open_source(source, progress)
    return Checkpoint(source, raw, build_card(raw, card), card)


def as_checkpoint(source: str | Checkpoint | None, card: Card | None = None,
                  progress: Progress | None = None) -> Checkpoint:
    """`source` itself when it is already opened (its card stands: give the user card when opening it),
    else the opened `source`."""
    if isinstance(source, Checkpoint):
        if card is not None and card is not source.user_card:
            raise ValueError("the checkpoint is already opened with its card; pass the user card to open_checkpoint")
        return source
    return open_checkpoint(source, card, progress)
