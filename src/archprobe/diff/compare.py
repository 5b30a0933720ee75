"""The weight sections of `archprobe diff` (`--data`, `--forward`) added to the header document.

Why one place: both sections open the two sides the way validate does (diff/data.py `open_weights`), once,
and both extend archprobe.diff/1 additively: `data` and `forward` sections, their figures in `summary`, and
`identical` false when a weight differs (the headers may agree while the data does not).
"""

from __future__ import annotations

from archprobe.errors import ArchprobeError
from archprobe.formats.limits import MAX_FORWARD_TOKENS


def read_prompt_file(path: str) -> str:
    """The file's texts (blank-line separated, as observe reads them) as one prompt."""
    from archprobe.observe.sample import read_prompt_file as texts

    return "\n\n".join(texts(path))


def add_weight_sections(doc: dict, a: str, b: str, *, data: bool, forward: bool, prompt: str | None = None,
                        ids: list[int] | None = None, limit: int = 200, progress=None) -> dict:
    from archprobe.diff.data import data_diff, open_weights

    wa, wb = open_weights(a), open_weights(b)
    if data:
        doc["data"] = data_diff(wa, wb, limit=limit, progress=progress)
        doc["summary"]["tensors_data_differing"] = doc["data"]["differing"]
        doc["summary"]["worst_layer_data"] = doc["data"]["worst_layer"]
        if doc["data"]["differing"]:
            doc["identical"] = False
    if forward:
        from archprobe.diff.forward import forward_diff, prompt_ids

        tokens, info = prompt_ids(wa, wb, prompt, ids)
        if len(tokens) > MAX_FORWARD_TOKENS:
            raise ArchprobeError(f"the prompt is {len(tokens):,} tokens; --forward runs at most "
                                 f"{MAX_FORWARD_TOKENS:,}")
        doc["forward"] = forward_diff(wa, wb, tokens, info)
        logits = doc["forward"]["logits"]
        doc["summary"]["mean_kld"] = logits.get("mean_kld")
        doc["summary"]["same_top_p"] = logits.get("same_top_p")
    return doc
