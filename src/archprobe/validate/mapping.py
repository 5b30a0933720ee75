"""What the hub fetch step needs to know before a card exists: the vision tower prefixes it skips
and the nested-config unwrap for the layer count. Family mappings moved to the card (structure/);
validate builds the model from the card (validate/build.py)."""

from __future__ import annotations

VISION = ("vision_tower.", "mm_projector.", "visual.", "vision_model.", "multi_modal_projector.")


def text_config(cfg: dict) -> dict:
    return cfg.get("text_config") or cfg
