"""Every path word of a checkpoint replaced by a nonsense word (layer numbers and the `weight` / `bias` leaves
kept): a family nobody has named yet, whose card must come from shapes alone. `keep` names the words left as
they are: the ones that only break ties between same-shaped tensors (q vs k vs v of equal widths), which no
shape can settle."""

from __future__ import annotations

import json

LEAVES = {"weight", "bias"}
# the words only names can settle (same-shaped q / k / v, their norms and convs, gate / up): a twin keeps them
TIES = {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "w1", "w3", "q_norm", "k_norm", "q_conv1d", "k_conv1d",
        "v_conv1d"}


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


def write_renamed_twin(src, dst, keep=TIES):
    """A copy of the one-file checkpoint `src` at `dst` with every path word nonsense (but `keep`) and an
    unknown model_type (no auto_map); returns the renaming function."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(src / "model.safetensors"), "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    rename = nonsense_words(tensors, keep=keep)
    names = {k: rename(k) for k in tensors}
    dst.mkdir(parents=True)
    save_file({names[k]: v for k, v in tensors.items()}, str(dst / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((src / "config.json").read_text())
    config.pop("auto_map", None)
    config["model_type"], config["architectures"] = "zq_lm", ["ZqForCausalLM"]
    (dst / "config.json").write_text(json.dumps(config))
    return rename


def without_evidence(x):
    """A card part with its evidence (tensor names, by construction different) left out."""
    if isinstance(x, dict):
        return {k: without_evidence(v) for k, v in x.items() if k not in ("evidence", "layout")}
    if isinstance(x, list):
        return [without_evidence(v) for v in x]
    return x
