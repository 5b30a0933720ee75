"""What each validate status claims, in one place: the pipeline sets it, the terminal and the report gloss it.

`pass` is earned only by a comparison that held; a run with nothing to compare against is `ran`."""

from __future__ import annotations

MEANING = {
    "pass": "every bound tensor loaded, outputs finite, and the logits agree with the reference "
            "within the fp32 gate",
    "ran": "every bound tensor loaded and outputs finite; nothing was compared "
           "(--reference transformers compares)",
    "fail": "a tensor is missing, an output is not finite, or the reference disagrees or could not run",
    "unsupported": "the card describes something archprobe.nn cannot run yet",
}
STATUSES = tuple(MEANING)


def meaning(status) -> str:
    """The one-line gloss of `status`; empty for anything else (a hostile document's string)."""
    return MEANING.get(status, "") if isinstance(status, str) else ""
