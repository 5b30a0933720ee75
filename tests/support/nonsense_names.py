"""Every path word of a checkpoint replaced by a nonsense word (layer numbers and the `weight` / `bias` leaves
kept): a family nobody has named yet, whose card must come from shapes alone. `keep` names the words left as
they are: the ones that only break ties between same-shaped tensors (q vs k vs v of equal widths), which no
shape can settle."""

from __future__ import annotations

LEAVES = {"weight", "bias"}


def nonsense_words(names, keep=frozenset()):
    """A renaming function: one nonsense word per distinct path component of `names`, in sorted order
    (deterministic); digits, `*` (a card's expert-index pattern) and the `weight` / `bias` leaves stay."""
    parts = sorted({p for n in names for p in n.split(".") if not p.isdigit()} - LEAVES - set(keep) - {"*"})
    word = {p: f"zq{i:03d}" for i, p in enumerate(parts)}

    def rename(name: str) -> str:
        bits = name.split(".")
        return ".".join(b if b.isdigit() or b in keep or b == "*" or (i == len(bits) - 1 and b in LEAVES)
                        else word[b] for i, b in enumerate(bits))
    return rename


def nonsense_map(names, keep=frozenset()) -> dict[str, str]:
    """Original name -> renamed (see nonsense_words)."""
    rename = nonsense_words(names, keep)
    out = {n: rename(n) for n in names}
    assert len(set(out.values())) == len(out)
    return out


def bindings(folder) -> dict[str, str]:
    """The card's role -> tensor name map for a checkpoint folder."""
    from archprobe.formats.sources import open_source
    from archprobe.structure.inspect import build_card

    return dict(build_card(open_source(str(folder))).card.tensors)
