"""Issue 24: "names only break ties" is written once. Every word a detector in structure/ or kinds/ matches a
path against lives in structure/names.py's WORDS table; detectors ask `rank` / `says` with a role. The source
walk fails on a word literal meeting a path's words outside names.py, on a private tie-break helper, on a
`*_WORDS` table bound to a literal or a module-level set of strings used against a path's words, and on a
role that is not in the table."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import archprobe
from archprobe.structure.names import WORDS, rank, says

SRC = Path(archprobe.__file__).parent
DETECTORS = sorted(p for d in ("structure", "kinds") for p in (SRC / d).glob("*.py") if p.name != "names.py")
TIE_BREAKERS = {"rank", "says"}
OLD_HELPERS = {"_by_words", "by_words", "_by_names"}     # the per-detector helpers names.py replaced


def _strings(node: ast.AST) -> bool:
    """A literal collection of strings ({"q", "q_proj"}, ("a", "b"), frozenset({...})) or one string."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("set", "frozenset"):
        return len(node.args) == 1 and _strings(node.args[0])
    return isinstance(node, (ast.Set, ast.Tuple, ast.List)) and bool(node.elts) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)


def _calls_words(node: ast.AST, bound: set[str] = frozenset()) -> bool:
    """Whether an expression reads a path's words: words(...) itself or a name bound to it (w = words(p))."""
    return any((isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "words")
               or (isinstance(n, ast.Name) and n.id in bound) for n in ast.walk(node))


def _bound_to_words(tree: ast.AST) -> set[str]:
    return {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and _calls_words(n.value)
            for t in n.targets if isinstance(t, ast.Name)}


def word_literals(tree: ast.AST) -> list[str]:
    """Where a literal word (set) meets a path's words: `words(p) & {...}`, `"x" in words(p)`, or a literal
    passed as a role to a tie-break; also a helper of its own that orders by words, and `*_WORDS = {...}`."""
    found = []
    bound = _bound_to_words(tree)
    tables = {t.id for node in getattr(tree, "body", []) if isinstance(node, ast.Assign) and _strings(node.value)
              for t in node.targets if isinstance(t, ast.Name)}    # module-level string collections
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.Sub)):
            literal = lambda n: _strings(n) or (isinstance(n, ast.Name) and n.id in tables)  # noqa: E731
            if (literal(node.left) and _calls_words(node.right, bound)) or (
                    literal(node.right) and _calls_words(node.left, bound)):
                found.append(f"line {node.lineno}: a word set against words(...)")
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            if _strings(node.left) and any(_calls_words(c, bound) for c in node.comparators):
                found.append(f"line {node.lineno}: a word tested in words(...)")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in TIE_BREAKERS | OLD_HELPERS:
            if any(not (isinstance(a, ast.Constant) and isinstance(a.value, str)) for a in node.args[1:]):
                found.append(f"line {node.lineno}: {node.func.id}(...) given something other than role names")
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)) and getattr(node, "name", "") in (
                OLD_HELPERS | TIE_BREAKERS):
            found.append(f"line {node.lineno}: a tie-break helper of its own ({node.name})")
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.endswith("_WORDS")
                                                  for t in node.targets):
            if _strings(node.value) or isinstance(node.value, ast.Dict):
                found.append(f"line {node.lineno}: a word table of its own")
    return found


def roles_used(tree: ast.AST) -> set[str]:
    """Role names the detectors ask for: rank/says arguments and WORDS["..."] look-ups."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in TIE_BREAKERS:
            out.update(a.value for a in node.args[1:] if isinstance(a, ast.Constant))
        if isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == "WORDS" and isinstance(
                node.slice, ast.Constant):
            out.add(node.slice.value)
    return out


def test_no_detector_holds_its_own_words():
    bad = {p.relative_to(SRC).as_posix(): hits for p in DETECTORS if (hits := word_literals(ast.parse(p.read_text())))}
    assert bad == {}


def test_the_walk_catches_the_old_spellings():
    """The patterns this replaced (issue 24's 21 inline word sets) are what the walk reports."""
    old = '''
OUT_WORDS = {"o", "out"}
def _by_words(mods, *wanted): ...
a, b = _by_words(pair, {"a_log", "a"}, {"dt_bias", "dt"})
x = [m for m in mods if words(m.path) & {"shared", "shexp"}]
y = [m for m in mods if "indexer" not in words(m.path)]
z = rank(mods, {"q", "q_proj"})
MIXER_SIDE = {"attn", "mixer"}
def side(m):
    w = words(m.path) | {m.leaf}
    return "post" in w, len(w & MIXER_SIDE)
'''
    assert len(word_literals(ast.parse(old))) == 8


def test_every_role_asked_for_is_in_the_table():
    asked = set().union(*(roles_used(ast.parse(p.read_text())) for p in DETECTORS))
    assert asked, "the walk found no tie-break call: it no longer sees the detectors"
    assert asked - set(WORDS) == set()


@dataclass
class Named:
    path: str


def test_rank_orders_by_the_first_role_named_and_never_drops():
    mods = [Named("layers.0.attn.value"), Named("layers.0.attn.wk"), Named("layers.0.attn.mystery"),
            Named("layers.0.attn.q_proj")]
    ordered = rank(mods, "q", "k", "v")
    assert [m.path.rsplit(".", 1)[1] for m in ordered] == ["q_proj", "wk", "value", "mystery"]
    assert rank(list(reversed(mods)), "q", "k", "v") == ordered           # header order does not matter
    assert sorted(m.path for m in rank(mods)) == sorted(m.path for m in mods)


def test_says_matches_whole_words_not_substrings():
    assert says("model.layers.3.mlp.shared_expert.up_proj", "shared_expert")
    assert says("blk.3.ffn_up_shexp", "shared_expert")                    # a word inside an underscored name
    assert not says("model.layers.3.mlp.sharedx.up_proj", "shared_expert")
    assert not says("model.layers.3.self_attn.q_proj", "k")
