"""What a reach signal and a usage signal are, and why one never stands in for the other."""

from __future__ import annotations

from archprobe.errors import ArchprobeError

REACH, USAGE, ADAPTATION = "reach", "usage", "adaptation"

WHY_APART = ("reach signals (hub downloads, likes, mirrors) count who fetched or noticed the files, by anyone and "
             "for any reason (CI jobs, mirrors, crawlers, re-downloads); usage signals (a server's request and token "
             "counters) count inference on the deployments you scraped and nowhere else. Neither measures the "
             "other, so a sum or ratio of the two has no meaning; archprobe plots each series in its own panel. "
             "Adaptation signals (which framework releases register the architecture, open and merged upstream "
             "work) are facts about the frameworks, not about people: they are neither reach nor usage and are "
             "never combined with either.")


def refuse_mixing(kind_a: str, kind_b: str, what: str) -> None:
    if kind_a != kind_b:
        raise ArchprobeError(f"refused: {what} mixes a {kind_a} signal with a {kind_b} signal", hint=WHY_APART)
