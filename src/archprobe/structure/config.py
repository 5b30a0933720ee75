"""config.json read once, checked, and asked by key: what shapes cannot say (theta, eps, activation,
top-k, scoring, ...).

The language model's block is unwrapped once (`text_config`, `llm_config`, `language_config`, ...);
`quantization_config` is looked up there first (K3 keeps it inside `text_config` only). Lookups
fall back to the family sub-blocks (`linear_attn_config`, `attn_config`, `ffn_config`, `rope_scaling`,
...). Every number the card takes is checked: an integer (not a bool, not a float), not negative,
within sane bounds (<= 1e6 layers, <= 1e8 hidden, ...), else a one-line ConfigError naming the key. A
zero is "not set". Config nesting deeper than MAX_DEPTH is refused.
"""

from __future__ import annotations

import math
from typing import Any

from archprobe.errors import ArchprobeError
from archprobe.formats.limits import MAX_DEPTH
from archprobe.structure.family_defaults import family_default

NESTED_TEXT_KEYS = ("text_config", "llm_config", "language_config", "text_model_config")
SUB_BLOCKS = ("linear_attn_config", "attn_config", "ffn_config", "ssm_cfg", "mamba_config", "moe_config")
BOUNDS = {"num_hidden_layers": 1_000_000, "n_layer": 1_000_000, "num_layers": 1_000_000, "n_layers": 1_000_000,
          "hidden_size": 100_000_000, "d_model": 100_000_000, "n_embd": 100_000_000}
DEFAULT_BOUND = 10**12


class ConfigError(ArchprobeError):
    """config.json holds a value archprobe cannot use (the message names the key)."""


def _depth(obj: Any, limit: int) -> int:
    """Nesting depth of a JSON value, iteratively (a hostile config must not blow the stack)."""
    stack = [(obj, 1)]
    deepest = 0
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(node, dict):
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, d + 1) for v in node)
    return deepest


class ConfigView:
    """The (nested) text config with checked getters; `raw` is the whole file, `text` the LM block."""

    def __init__(self, cfg: dict | None):
        cfg = cfg if isinstance(cfg, dict) else {}
        if _depth(cfg, MAX_DEPTH) > MAX_DEPTH:
            raise ConfigError(f"config.json is nested deeper than {MAX_DEPTH} levels")
        self.raw = cfg
        self.text, self.nested_in = cfg, None
        for key in NESTED_TEXT_KEYS:
            if isinstance(cfg.get(key), dict) and cfg[key]:
                self.text, self.nested_in = cfg[key], key
                break
        self.model_type = str(self.text.get("model_type") or cfg.get("model_type") or "unknown")
        self.wrapper_model_type = str(cfg.get("model_type")) if self.nested_in else None
        archs = self.text.get("architectures") or cfg.get("architectures") or []
        self.architectures = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
        self.remote_code = bool(cfg.get("auto_map") or self.text.get("auto_map"))
        qc = self.text.get("quantization_config") or cfg.get("quantization_config") or self.text.get("quantization")
        self.quantization_config = qc if isinstance(qc, dict) else None

    def lookup(self, key: str) -> tuple[Any, str | None]:
        """(value, the key path it came from) from the text block, its sub-blocks, then the wrapper."""
        if key in self.text and self.text[key] is not None:
            return self.text[key], key
        for block in SUB_BLOCKS:
            sub = self.text.get(block)
            if isinstance(sub, dict) and sub.get(key) is not None:
                return sub[key], f"{block}.{key}"
        if self.nested_in and self.raw.get(key) is not None:
            return self.raw[key], key
        return None, None

    def get(self, key: str, default: Any = None) -> Any:
        v, _ = self.lookup(key)
        return default if v is None else v

    def int_at(self, key: str) -> tuple[int | None, str | None]:
        """A checked integer: ConfigError for a non-integer, negative or absurd value; 0 reads as unset."""
        v, where = self.lookup(key)
        if v is None:
            return None, None
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"config.json: {where} = {v} is not finite (a count, width or size must be)")
        if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"config.json: {where} = {str(v)[:40]!r} is not an integer")
        if v < 0:
            raise ConfigError(f"config.json: {where} = {v} is negative")
        bound = BOUNDS.get(key, DEFAULT_BOUND)
        if v > bound:
            raise ConfigError(f"config.json: {where} = {v} is over the sane bound {bound:.0e}")
        return (v or None), where

    def first_int(self, *keys: str) -> int | None:
        for k in keys:
            v, _ = self.int_at(k)
            if v is not None:
                return v
        return None

    def first_int_at(self, *keys: str) -> tuple[int | None, str | None]:
        for k in keys:
            v, where = self.int_at(k)
            if v is not None:
                return v, where
        return None, None

    def float_at(self, key: str) -> tuple[float | None, str | None]:
        v, where = self.lookup(key)
        if v is None:
            return None, None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(f"config.json: {where} = {str(v)[:40]!r} is not a finite number")
        return float(v), where

    def first_float(self, *keys: str) -> float | None:
        for k in keys:
            v, _ = self.float_at(k)
            if v is not None:
                return v
        return None

    def first_float_at(self, *keys: str) -> tuple[float | None, str | None]:
        for k in keys:
            v, where = self.float_at(k)
            if v is not None:
                return v, where
        return None, None

    def first_str_at(self, *keys: str) -> tuple[str | None, str | None]:
        for k in keys:
            v, where = self.lookup(k)
            if isinstance(v, str) and v:
                return v, where
        return None, None

    def default(self, key: str):
        """The per-family quirk table's value (origin `default`), by model_type."""
        return family_default(self.model_type, key)
