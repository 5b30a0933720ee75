"""Card JSON of every zoo member and twin, to check a refactor leaves every card unchanged (issue 24's
"behaviour unchanged" must-hold). Run it once per source tree, then compare:

    PYTHONPATH=<old>/src python benchmarks/zoo_cards.py ZOO_DIR before.json
    PYTHONPATH=src python benchmarks/zoo_cards.py ZOO_DIR after.json
    python benchmarks/zoo_cards.py --compare before.json after.json

ZOO_DIR is built on first use by tests/support/zoo.py (cached by content hash).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def dump(root: str, out: str) -> None:
    from tests.support.zoo import build_all

    from archprobe.errors import ArchprobeError
    from archprobe.structure.checkpoint import open_checkpoint

    cards = {}
    for name, path in sorted(build_all(root).items()):
        try:
            cards[name] = open_checkpoint(str(path), None, None).card.to_dict()
        except ArchprobeError as exc:
            cards[name] = f"refused: {exc}"
    Path(out).write_text(json.dumps(cards, sort_keys=True, default=str))
    print(f"{len(cards)} cards -> {out}")


def compare(before: str, after: str) -> int:
    a, b = (json.loads(Path(p).read_text()) for p in (before, after))
    changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    print(f"{len(a.keys() & b.keys()) - len(set(changed) & a.keys() & b.keys())} of {len(a.keys() | b.keys())} "
          f"cards identical" + (f"; changed: {', '.join(changed)}" if changed else ""))
    return 1 if changed else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    dump(sys.argv[1], sys.argv[2])
