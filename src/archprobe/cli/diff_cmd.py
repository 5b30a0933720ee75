"""`archprobe diff A B`: two checkpoints compared from their headers (archprobe.diff/1); `--data` adds the
weights tensor by tensor, `--forward` both forwards on one prompt (diff/data.py, diff/forward.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli.output import emit
from archprobe.cli.params import JsonOpt, NoProgressOpt, PromptFileOpt, PromptIdsOpt, PromptOpt
from archprobe.cli.progress import item_progress, shard_progress

_HELP = "Local folder, .safetensors/.gguf file, or hub repo id org/name[@revision][:GGUF_TAG] (as inspect)."
SideA = Annotated[str, typer.Argument(help=_HELP, show_default=False)]
SideB = Annotated[str, typer.Argument(help=_HELP, show_default=False)]
LimitOpt = Annotated[int, typer.Option("--limit", min=1, max=100000,
                                       help="Entries kept per list (the rest are counted as left out).")]
FilesOnlyOpt = Annotated[bool, typer.Option("--files-only", help="Only which files hold the same bytes: hub "
                                            "sides from the hub's sha256 / git digests (no file bytes read), "
                                            "a local side hashed here.")]
DataOpt = Annotated[bool, typer.Option("--data", help="Also compare the weights tensor by tensor (local sources; "
                                                      "dequantized; two tensors resident at a time).")]
ForwardOpt = Annotated[bool, typer.Option("--forward", help="Also run both on one prompt: per-layer hidden states "
                                                            "and llama.cpp's KLD statistics of the logits.")]


def diff(a: SideA, b: SideB, json_out: JsonOpt = False, no_progress: NoProgressOpt = False,
         limit: LimitOpt = 200, files_only: FilesOnlyOpt = False, data: DataOpt = False, forward: ForwardOpt = False,
         prompt: PromptOpt = None, prompt_file: PromptFileOpt = None, prompt_ids: PromptIdsOpt = None) -> None:
    """What changed between two checkpoints? Cards, config keys, tensors (added, removed, renamed, re-typed),
    parameter and byte deltas, from headers only; two hub sources also file by file (which shards changed,
    is the mirror byte-identical) from the hub's sha256 digests; --data and --forward compare weights and
    outputs. Exit 0 whether or not they differ.

    Examples: archprobe diff ./model ./model-fp8 ; archprobe diff org/name@v1 org/name@v2 --json ;
    archprobe diff org/name mirror/name --files-only ;
    archprobe diff ./model ./model-Q4_K_M.gguf --data --forward --prompt "The capital of France is"
    """

    from archprobe.diff.files import add_files, files_only_doc
    from archprobe.diff.headers import diff_sources
    from archprobe.errors import ArchprobeError

    if files_only and (data or forward):
        raise ArchprobeError("--files-only compares file digests only", hint="drop --data / --forward, or "
                             "--files-only")
    ids, text = _forward_input(forward, prompt, prompt_file, prompt_ids)
    if files_only:
        doc = files_only_doc(a, b, limit)
    else:
        with shard_progress(not no_progress and not json_out) as progress:
            doc = add_files(diff_sources(a, b, progress=progress, limit=limit), a, b, limit)
    if data or forward:
        from archprobe.diff.compare import add_weight_sections

        add_weight_sections(doc, a, b, data=data, forward=forward, prompt=text, ids=ids, limit=limit,
                            progress=item_progress(not no_progress and not json_out, "tensors"))
    from archprobe.cli.render.diff import render_diff

    emit(doc, json_out, render_diff)


def _forward_input(forward: bool, prompt: str | None, prompt_file: str | None, prompt_ids: str | None):
    """(ids, text) for --forward, checked before anything is read."""
    from archprobe.cli import options
    from archprobe.errors import ArchprobeError

    given = [o for o, v in (("--prompt", prompt), ("--prompt-file", prompt_file), ("--prompt-ids", prompt_ids))
             if v is not None]
    if given and not forward:
        raise ArchprobeError(f"{given[0]} is --forward's input", hint="add --forward")
    if len(given) > 1:
        raise ArchprobeError(f"give one of {', '.join(given)}")
    if prompt_file is not None:
        from archprobe.diff.compare import read_prompt_file

        prompt = read_prompt_file(prompt_file)
    return (options.token_ids(prompt_ids) if prompt_ids else None), prompt

