"""The graph of widths: which matrices read the model width X and which write it, in either storage order.

A projection is a reader of X when it maps X to some width W and a writer when it maps W back to X.
Linear layers store [out, in]; GPT-2's Conv1D and stacked expert banks (gpt-oss) store [in, out]. The
orientation of a group of matrices is chosen as the one under which the group is consistent (every
writer's input width is a reader's output width, or half of a fused one), biases (whose length is the
output width) first, names only when both orientations fit.
"""

from __future__ import annotations

from archprobe.structure.modules import Module
from archprobe.structure.names import says


def mat(m: Module) -> tuple[int, int] | None:
    """The per-item [a, b] of a 2-D module (or of each expert of a stacked [E, a, b] bank)."""
    s = m.shape
    if len(s) == 2:
        return s[0], s[1]
    if len(s) == 3 and s[1] > 1 and s[2] > 1:
        return s[1], s[2]
    return None


def bias_says_transposed(mods: list[Module]) -> bool | None:
    """A bias has the output width: [in, out] storage when it matches the last dim only."""
    votes = set()
    for m in mods:
        ab = mat(m)
        if ab is None or m.bias is None:
            continue
        n = m.bias.shape[-1] if m.bias.shape else None
        if n == ab[1] and n != ab[0]:
            votes.add(True)
        elif n == ab[0] and n != ab[1]:
            votes.add(False)
    return votes.pop() if len(votes) == 1 else None


def split_io(mods: list[Module], X: int, transposed: bool) -> tuple[list[tuple[Module, int]], list[tuple[Module, int]]]:
    """(readers [(module, out width)], writers [(module, in width)]) of width X in the given storage order.

    A square [X, X] matrix could be either: it is the writer when nothing else writes X (by name among
    several squares, else the last), a reader otherwise.
    """
    readers, writers, squares = [], [], []
    for m in mods:
        ab = mat(m)
        if ab is None:
            continue
        out, inp = (ab[1], ab[0]) if transposed else ab
        if inp == X and out != X:
            readers.append((m, out))
        elif out == X and inp != X:
            writers.append((m, inp))
        elif out == X and inp == X:
            squares.append(m)
    if squares and not writers:
        named = [m for m in squares if says(m.path, "writer")]
        w = (named or squares)[-1]
        writers.append((w, X))
        squares = [m for m in squares if m is not w]
    readers += [(m, X) for m in squares]
    return readers, writers


def mlp_roles(mods: list[Module], X: int, transposed_hint: bool | None = None) -> dict | None:
    """{"gate", "up", "down" | "gate_up", "down" | "up", "down"} + layout, if `mods` form an MLP on width X.

    Tries [out, in] first, then [in, out]; the first consistent reading wins (a bias decides first).
    """
    hint = bias_says_transposed(mods) if transposed_hint is None else transposed_hint
    orders = [hint] if hint is not None else [False, True]
    for transposed in orders:
        readers, writers = split_io(mods, X, transposed)
        if len(writers) != 1 or not 1 <= len(readers) <= 2 or len(readers) + 1 != len([m for m in mods if mat(m)]):
            continue
        down, width = writers[0]
        if len(readers) == 2 and readers[0][1] == readers[1][1] == width:
            a, b = readers
            gate, up = _gate_up_order(a[0], b[0])
            return {"gate": gate, "up": up, "down": down, "width": width, "gated": True,
                    "layout": {"transposed": True} if transposed else {}}
        if len(readers) == 1 and readers[0][1] == 2 * width:
            lay = {"gate_up": "halves"}
            if transposed:
                lay["transposed"] = True
            return {"gate_up": readers[0][0], "down": down, "width": width, "gated": True, "layout": lay}
        if len(readers) == 1 and readers[0][1] == width:
            return {"up": readers[0][0], "down": down, "width": width, "gated": False,
                    "layout": {"transposed": True} if transposed else {}}
    return None


def _gate_up_order(a: Module, b: Module) -> tuple[Module, Module]:
    """Which of two same-shaped readers is the gate: names break the tie, else header order."""
    a_up, b_up, a_gate, b_gate = says(a.path, "ffn_up"), says(b.path, "ffn_up"), says(a.path, "ffn_gate"), says(
        b.path, "ffn_gate")
    if a_up and not b_up or b_gate and not a_gate:
        return b, a
    if a_gate or b_up:
        return a, b
    return (a, b) if a.path <= b.path else (b, a)
