"""validate's load step: the checkpoint as inspect reads it, its card, and the tensor reader.

The folder is opened once, as inspect opens it (structure/checkpoint.py: the same shard list, index
rules, caps and header checks; the card derived once, the user's `--card` laid over it), and
`TensorReader` fetches tensor data by checkpoint name from the shards those headers came from. The
safetensors library only memory-maps the data of a tensor when asked; headers are never listed or
parsed a second time here."""

from __future__ import annotations

import os
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from archprobe.errors import CheckpointError, SourceError


class TensorReader:
    """checkpoint name -> tensor, for the shards of a RawCheckpoint (folded expert names unfolded)."""

    def __init__(self, folder: str, headers):
        self.folder = folder
        self.files: dict[str, list[str]] = {}     # name as the header lists it (maybe folded) -> shard files
        self.shapes: dict[str, tuple] = {}
        self.counts: dict[str, int] = {}
        for h in headers:
            for t in h.tensors:
                self.files.setdefault(t.name, []).append(t.file)
                self.shapes.setdefault(t.name, tuple(t.shape))
                self.counts[t.name] = self.counts.get(t.name, 0) + t.count

    def listed(self, name: str) -> str | None:
        """The header's spelling of `name`: itself, or a folded family with `*` at one of its indices
        (the formats layer folds enumerated experts, `...experts.7.w1` -> `...experts.*.w1`)."""
        if name in self.files:
            return name
        parts = name.split(".")
        for k in range(len(parts) - 1, -1, -1):
            if parts[k].isdigit():
                folded = ".".join(parts[:k] + ["*"] + parts[k + 1:])
                if folded in self.files:
                    return folded
        return None

    def shape(self, name: str) -> tuple | None:
        """The stored shape; a name with `*` (a whole enumerated family bound to one role) is [count, ...]."""
        listed = self.listed(name)
        if listed is None:
            return None
        return (self.counts[listed], *self.shapes[listed]) if "*" in name else self.shapes[listed]

    def __contains__(self, name: str) -> bool:
        return self.listed(name) is not None

    def all_shapes(self, names) -> dict[str, tuple]:
        return {n: s for n in names if (s := self.shape(n)) is not None}

    @contextmanager
    def session(self):
        """Yields `get(name) -> tensor`; each shard is opened (memory-mapped) at most once per session."""
        from safetensors import safe_open

        from archprobe.formats.limits import reading_deadline
        from archprobe.formats.localfiles import regular_file_inside

        with ExitStack() as stack:
            handles: dict[str, object] = {}

            def handle(file: str):
                path = os.path.join(self.folder, file)
                if file not in handles:
                    # checked again at open time: a shard swapped for a FIFO or a link out after the headers
                    # were read must not hang or leave the folder
                    regular_file_inside(self.folder, path)
                    try:
                        handles[file] = stack.enter_context(safe_open(path, framework="pt"))
                    except SourceError:        # the reading deadline, as it is
                        raise
                    except Exception as exc:   # the safetensors library raises its own error types
                        raise CheckpointError(path, f"cannot open shard ({str(exc).splitlines()[0][:160]})") from None
                return handles[file]

            def get(name: str):
                if "*" in name:   # a family bound to one role (per-head norms): stacked along a new first dim
                    import torch

                    n = self.counts.get(self.listed(name) or "", 0)
                    return torch.stack([get(name.replace("*", str(i), 1)) for i in range(n)])
                listed = self.listed(name)
                files = self.files.get(listed) if listed else None
                if not files:
                    raise CheckpointError(self.folder, f"tensor {name!r} is in no shard")
                last = None
                for file in files:   # a folded expert family may span shards: the one that has it
                    try:
                        # each tensor read within the command's reading deadline (a slow or stalled file
                        # system ends in one line, not a hang); SourceError passes through as it is
                        with reading_deadline(f"{os.path.join(self.folder, file)}: tensor {name!r}"):
                            return handle(file).get_tensor(name)
                    except (CheckpointError, SourceError):
                        raise
                    except Exception as exc:
                        last = (file, exc)
                path = os.path.join(self.folder, last[0])
                raise CheckpointError(path, f"cannot read tensor {name!r} "
                                            f"({str(last[1]).splitlines()[0][:160]})") from None

            yield get


@dataclass
class Loaded:
    folder: str
    config: dict
    card: object                   # archprobe.structure.card.Card
    reader: TensorReader
    warnings: list
    gguf_file: str | None = None   # a GGUF source: its (first) file's name in `folder` (validate/gguf_reader.py)


def gguf_norms_applied_as_stored(card, meta: dict):
    """ggml multiplies by a norm's stored gain in every architecture (llama.cpp's converter writes
    1 + w for Gemma-style norms), so a GGUF card's unknown norm offsets are False, not unknown; and its
    FFN activation is the one llama.cpp's graph uses for the architecture."""
    from archprobe.formats.gguf import GGUF_ACTIVATION

    act = GGUF_ACTIVATION.get(meta.get("general.architecture"))
    for layer in card.layers:
        if act and layer.ffn is not None and layer.ffn.activation is None:
            layer.ffn.activation = act
    norms = [card.final_norm] + [n for layer in card.layers for n in layer.norm.values()]
    for norm in norms:
        if norm is not None and norm.offset is None:
            norm.offset = False
    return card


def load(source, card=None) -> Loaded:
    """The tensor reader and card of a local checkpoint: `source` an opened `Checkpoint`
    (structure/checkpoint.py; its card, derived once, is the one validated) or a local path, opened here with
    the user's `card` (a Card) laid over the derived one."""
    import copy

    from archprobe.structure.checkpoint import as_checkpoint

    ck = as_checkpoint(source, card)
    raw = ck.raw
    if raw.kind == "gguf" and os.path.exists(raw.location):
        from archprobe.validate.gguf_reader import GGUFTensorReader

        base = raw.location if os.path.isdir(raw.location) else os.path.dirname(raw.location)
        # a copy: the caller's card (shown by inspect and the report) keeps its unknowns
        card = gguf_norms_applied_as_stored(copy.deepcopy(ck.card), (raw.gguf_metadata or {}))
        reader = GGUFTensorReader(base, raw.headers, raw.gguf_metadata or {}, raw.config or {})
        return Loaded(base, raw.config or {}, card, reader, list(raw.warnings), raw.headers[0].file)
    if raw.kind != "local" or raw.gguf_metadata is not None:
        raise SourceError(f"{ck.source}: validate runs safetensors and GGUF checkpoints (this is {raw.kind})")
    if not raw.config:
        raise SourceError(f"{ck.source}: no config.json")
    base = raw.location if os.path.isdir(raw.location) else os.path.dirname(raw.location)
    return Loaded(base, raw.config, ck.card, TensorReader(base, raw.headers), list(raw.warnings))
