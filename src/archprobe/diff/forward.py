"""`archprobe diff A B --forward`: both checkpoints run on the same tokens, hidden states and logits compared.

Each side runs through validate's streamed forward (validate/stream.py: archprobe.nn, one layer resident at a
time, weights dequantized from disk), so a GGUF file and a safetensors folder run the same code. Per layer:
the relative RMS difference of the layer outputs ||hB - hA|| / ||hA||, max |hB - hA| and their cosine. Final
logits: llama.cpp's `llama-perplexity --kl-divergence` statistics with A as the base (tools/perplexity/
perplexity.cpp), over every position t that has a next token (t < T - 1; llama.cpp scores the second half
of each chunk, a prompt here is one chunk scored whole):

- KLD_t = sum_v p_A(v) (log p_A(v) - log p_B(v)); mean, with its uncertainty sqrt(var / (n - 1)) when n > 10,
  and the 99 / 99.9 percentiles (linear between the two nearest sorted values at fraction * (n - 1)) and max;
- delta-p_t = p_B(x_{t+1}) - p_A(x_{t+1}) for the prompt's next token; RMS delta-p = sqrt(mean delta-p^2);
- same top p = share of positions whose most likely token is the same on both sides.

llama.cpp stores the base log-probabilities in 16 bits and drops p_A below e^-16; here both sides are float64
from the float32 logits, so the numbers are the exact ones its approximation aims at. Two architectures are
compared as far as they match: layers past the shorter plan, or with other widths, and logits over other
vocabularies are reported as not compared, with why.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from archprobe.errors import ArchprobeError

DEFAULT_IDS = [1, 2, 3, 4, 5, 6, 7, 8]
PERCENTILES = (0.99, 0.999)


@dataclass
class Run:
    """One side's forward: logits [T, V] (None when a layer did not run) and each layer's output [T, H]."""

    logits: torch.Tensor | None
    hidden: list[torch.Tensor]
    error: str | None = None


def run_side(weights, ids: list[int], dtype: torch.dtype = torch.float32) -> Run:
    """The streamed forward of one opened side (diff.data.Weights) on `ids`; never raises for a model
    archprobe.nn cannot run (the reason is the run's error)."""
    from archprobe.validate.build import blueprint
    from archprobe.validate.plan import Unsupported
    from archprobe.validate.stream import stream_forward

    loaded = weights.loaded
    n = len(loaded.card.layers)
    try:
        bp = blueprint(loaded.card, loaded.reader.all_shapes(loaded.card.tensors.values()), n)
    except Unsupported as exc:
        return Run(None, [], f"unsupported: {exc.message}")
    except ArchprobeError as exc:   # a field the forward needs that the card leaves unknown
        return Run(None, [], exc.message)
    if max(ids) >= bp.config.vocab_size:
        return Run(None, [], f"prompt token {max(ids)} is outside the vocabulary ({bp.config.vocab_size})")
    result = stream_forward(bp, loaded.reader, torch.tensor([ids]), dtype, n)
    hidden = [result.hidden.get(i)[0].float() for i in range(len(result.hidden))]
    result.hidden.close()
    error = "; ".join(sorted(set(result.problems)))[:400] or None
    return Run(result.logits[0].double() if result.logits is not None else None, hidden, error)


def prompt_ids(a, b, prompt: str | None, ids: list[int] | None) -> tuple[list[int], dict]:
    """Token ids both sides run on: given ids, the prompt tokenized by A's tokenizer.json (B's where A has
    none), or DEFAULT_IDS; with whether B's tokenizer gives the same ids."""
    import os

    from archprobe.validate.prompt import encode

    if prompt is None:
        return list(ids or DEFAULT_IDS), {"source": "ids" if ids else "default"}
    folders = [w.loaded.folder for w in (a, b) if os.path.isfile(os.path.join(w.loaded.folder, "tokenizer.json"))]
    if not folders:
        raise ArchprobeError("--prompt: neither side has a tokenizer.json", hint="pass --prompt-ids 1,2,3")
    out = encode(folders[0], prompt)
    info = {"source": "A's tokenizer" if folders[0] == a.loaded.folder else "B's tokenizer"}
    if len(folders) == 2 and folders[0] != folders[1]:
        info["tokenizers_agree"] = encode(folders[1], prompt) == out
    return out, info


def percentile(sorted_values: list[float], fraction: float) -> float:
    """llama.cpp's percentile: linear between the neighbours of position fraction * (n - 1)."""
    p = fraction * (len(sorted_values) - 1)
    i = int(p)
    j = min(i + 1, len(sorted_values) - 1)
    return (1 - (p - i)) * sorted_values[i] + (p - i) * sorted_values[j]


def logit_stats(base: torch.Tensor, other: torch.Tensor, ids: list[int]) -> dict:
    """KLD, delta-p and same-top-p of `other` against `base` (both [T, V]) at positions with a next token."""
    n = len(ids) - 1
    if n < 1:
        return {"error": "one token: no position has a next token to score"}
    lp, lq = torch.log_softmax(base[:n].double(), -1), torch.log_softmax(other[:n].double(), -1)
    kld = (lp.exp() * (lp - lq)).sum(-1)
    nxt = torch.tensor(ids[1:])
    dp = lq.exp().gather(1, nxt[:, None])[:, 0] - lp.exp().gather(1, nxt[:, None])[:, 0]
    same = (lp.argmax(-1) == lq.argmax(-1)).double()
    values = sorted(kld.tolist())
    mean = float(kld.mean())
    var = float((kld * kld).mean()) - mean * mean
    return {
        "positions": n,
        "mean_kld": mean, "mean_kld_uncertainty": (var / (n - 1)) ** 0.5 if var > 0 and n > 10 else 0.0,
        "kld_99": percentile(values, 0.99), "kld_99_9": percentile(values, 0.999), "max_kld": values[-1],
        "rms_delta_p": float(dp.square().mean().sqrt()), "mean_delta_p": float(dp.mean()),
        "max_abs_delta_p": float(dp.abs().max()),
        "same_top_p": float(same.mean()),
    }


def hidden_rows(a: Run, b: Run) -> list[dict]:
    """Per layer (in plan order, as far as both ran): relative RMS difference, max |diff| and cosine."""
    rows = []
    for i in range(max(len(a.hidden), len(b.hidden))):
        if i >= len(a.hidden) or i >= len(b.hidden):
            rows.append({"layer": i, "compared": False, "why": f"only {'A' if i < len(a.hidden) else 'B'} has it"})
            continue
        ha, hb = a.hidden[i].double(), b.hidden[i].double()
        if ha.shape != hb.shape:
            rows.append({"layer": i, "compared": False,
                         "why": f"widths differ: {list(ha.shape)} vs {list(hb.shape)}"})
            continue
        d = hb - ha
        na, nb = float(ha.norm()), float(hb.norm())
        rows.append({"layer": i, "compared": True, "rel_rms": float(d.norm()) / na if na else float(d.norm()),
                     "max_abs": float(d.abs().max()),
                     "cosine": float((ha * hb).sum()) / (na * nb) if na and nb else 1.0})
    return rows


def forward_diff(a, b, ids: list[int], prompt_info: dict, dtype: torch.dtype = torch.float32) -> dict:
    """The `forward` section of archprobe.diff/1 for two opened sides on `ids`."""
    ra, rb = run_side(a, ids, dtype), run_side(b, ids, dtype)
    out: dict = {"tokens": len(ids), "prompt": prompt_info, "dtype": str(dtype).removeprefix("torch."),
                 "errors": {k: r.error for k, r in (("a", ra), ("b", rb)) if r.error},
                 "layers": hidden_rows(ra, rb)}
    if ra.logits is None or rb.logits is None:
        out["logits"] = {"error": "not every layer ran on " + " and ".join(
            s for s, r in (("A", ra), ("B", rb)) if r.logits is None)}
    elif ra.logits.shape != rb.logits.shape:
        out["logits"] = {"error": f"vocabularies differ: {ra.logits.shape[-1]} vs {rb.logits.shape[-1]} tokens"}
    else:
        out["logits"] = logit_stats(ra.logits, rb.logits, ids)
    worst = max((r for r in out["layers"] if r["compared"]), key=lambda r: r["rel_rms"], default=None)
    out["worst_layer"] = worst["layer"] if worst and worst["rel_rms"] > 0 else None
    return out
