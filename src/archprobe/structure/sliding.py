"""Which attention layers keep a sliding window, by transformers' rules for any model_type.

transformers' configuration and modeling files agree on one generic reading (qwen2, mistral, phi3,
starcoder2, mixtral, gemma2/3, minimax read in transformers 5.x):

- a `sliding_window` of null (or 0) means none;
- `use_sliding_window: false` means none (qwen2/qwen3: `self.sliding_window = ... if self.use_sliding_window
  else None`); families whose config class defaults it to false (`sliding_opt_in` rows) need it true;
- `layer_types` of the model's length: the window on its `sliding_attention` (or `chunked`, `local`) layers only
  (qwen2, gemma2/3: `config.sliding_window if self.layer_type == "sliding_attention" else None`), unless the
  family's modeling file passes the window to every layer whatever the types (`sliding_all` rows: mistral,
  minimax: `sliding_window=getattr(self.config, "sliding_window", None)`);
- no layer types, `use_sliding_window: true` and `max_window_layers`: layers from that index on (qwen2's
  `i >= self.max_window_layers`);
- no layer types and `sliding_window_pattern` N: every N-th layer full, the others sliding (gemma3, cohere2,
  exaone4 `__post_init__`: `"sliding_attention" if (i + 1) % N != 0`), as configs written before
  `layer_types` say it; a string of `L` (local) and `G` (global) repeats from layer 0, the last layer global
  (exaone4's docstring);
- otherwise every attention layer (phi3, starcoder2: `sliding_window=getattr(self.config, "sliding_window",
  None)`). Where no config key but the window itself says so and the family has no row, that is a guess: origin
  `assumed`.
A family whose config carries the key and whose modeling file never reads it is a `sliding_ignored` row.

`sliding_window` as a list is a window per layer (null or 0: full attention there), as vLLM reads it; one
shorter than the model repeats over the layers (layer i takes entry i mod its length, vLLM's interleaved
reading of Ministral's `[w, w, w, full]`): a guess, origin `assumed`.
"""

from __future__ import annotations

from archprobe.structure.config import ConfigError

SLIDING_KINDS = ("sliding", "chunked", "local")


def layer_windows(cfg, n_layers: int, window: int | None, w_where: str | None, types) -> list[tuple[int, str] | None]:
    """Per layer: (window, origin) where it slides, else None. `types`: the config's layer types (or GPT-Neo's
    attention_layers), or None."""
    none: list[tuple[int, str] | None] = [None] * n_layers
    if not window or window <= 0 or cfg.default("sliding_ignored"):
        return none
    use = cfg.get("use_sliding_window")
    if use is False or (use is None and cfg.default("sliding_opt_in")):
        return none
    if cfg.default("sliding_all"):
        return [(window, "default")] * n_layers
    if isinstance(types, list) and len(types) == n_layers:
        return [(window, f"config:{w_where}") if any(k in str(t) for k in SLIDING_KINDS) else None for t in types]
    pattern = _pattern(cfg.get("sliding_window_pattern"), n_layers)
    if pattern is not None:
        return [(window, "config:sliding_window_pattern") if slides else None for slides in pattern]
    first = cfg.first_int("max_window_layers") if use is True else None
    if first is not None:
        return [(window, "config:max_window_layers") if i >= first else None for i in range(n_layers)]
    origin = "config:use_sliding_window" if use is True else "assumed"
    return [(window, origin)] * n_layers


def listed_windows(cfg, n_layers: int, values: list, where: str) -> list[tuple[int, str] | None]:
    """Per layer (window, origin) from a `sliding_window` list (see the module docstring)."""
    none: list[tuple[int, str] | None] = [None] * n_layers
    if not values or len(values) > n_layers or n_layers % len(values):
        raise ConfigError(f"config.json: {where} lists {len(values)} windows for {n_layers} layers (give one per "
                          "layer, or a pattern whose length divides the layer count)")
    for v in values:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 2**40):
            raise ConfigError(f"config.json: {where} holds {str(v)[:40]!r}, not a window size or null")
    if cfg.default("sliding_ignored") or cfg.get("use_sliding_window") is False:
        return none
    origin = f"config:{where}" if len(values) == n_layers else "assumed"
    return [(values[i % len(values)], origin) if values[i % len(values)] else None for i in range(n_layers)]


def _pattern(value, n_layers: int) -> list[bool] | None:
    """Per layer: slides? from a `sliding_window_pattern` int or L/G string; None where it says nothing."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return [(i + 1) % value != 0 for i in range(n_layers)]
    if isinstance(value, str) and value and set(value.upper()) <= {"L", "G"}:
        return [value[i % len(value)].upper() == "L" and i < n_layers - 1 for i in range(n_layers)]
    if value is None or value == 0:
        return None
    raise ConfigError(f"config.json: sliding_window_pattern = {str(value)[:40]!r} is neither a layer count nor "
                      "a string of L and G")
