"""A slot of a run: one (task, sample) cell of the grid, with its chain of attempts.

Why its own module: the runner decides what to run from slots and the report decides what to score
from the same slots; one definition of "settled" keeps the two from disagreeing.
"""

from __future__ import annotations

from dataclasses import dataclass

FINAL = ("pass", "fail")


@dataclass
class Slot:
    task_id: str
    sample: int
    chain: list          # AttemptRow, in try order

    def failures(self) -> int:
        return sum(1 for a in self.chain if a.outcome in ("error", "timeout"))

    def settled(self, max_retries: int) -> bool:
        last = self.chain[-1] if self.chain else None
        if last is None or last.outcome is None or last.outcome == "cancelled":
            return False
        if last.outcome in FINAL or self.failures() > max_retries:
            return True
        return last.detail.get("retryable") is False  # e.g. HTTP 400: asking again gives the same answer


def load_slots(rows: list, task_ids: list[str], attempts: int) -> list[Slot]:
    """The (task, sample) grid with each slot's attempt chain, from a run's attempt rows."""
    chains: dict[tuple[str, int], list] = {}
    for row in rows:
        chains.setdefault((row.task_id, row.sample), []).append(row)
    return [Slot(t, s, sorted(chains.get((t, s), []), key=lambda a: a.try_)) for t in task_ids
            for s in range(attempts)]
