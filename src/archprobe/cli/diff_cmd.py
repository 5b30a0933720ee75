"""`archprobe diff A B`: two checkpoints compared from their headers (archprobe.diff/1)."""

from __future__ import annotations

from typing import Annotated

import typer

from archprobe.cli._common import JsonOpt, NoProgressOpt, print_json, shard_progress

_HELP = "Local folder, .safetensors/.gguf file, or hub repo id org/name[@revision][:GGUF_TAG] (as inspect)."
SideA = Annotated[str, typer.Argument(help=_HELP, show_default=False)]
SideB = Annotated[str, typer.Argument(help=_HELP, show_default=False)]
LimitOpt = Annotated[int, typer.Option("--limit", min=1, max=100000,
                                       help="Entries kept per list (the rest are counted as left out).")]
FilesOnlyOpt = Annotated[bool, typer.Option("--files-only", help="Only which files hold the same bytes: hub "
                                            "sides from the hub's sha256 / git digests (no file bytes read), "
                                            "a local side hashed here.")]


def diff(a: SideA, b: SideB, json_out: JsonOpt = False, no_progress: NoProgressOpt = False,
         limit: LimitOpt = 200, files_only: FilesOnlyOpt = False) -> None:
    """What changed between two checkpoints? Cards, config keys, tensors (added, removed, renamed, re-typed),
    parameter and byte deltas, from headers only; two hub sources also file by file (which shards changed,
    is the mirror byte-identical) from the hub's sha256 digests. Exit 0 whether or not they differ.

    Examples: archprobe diff ./model ./model-fp8 ; archprobe diff org/name@v1 org/name@v2 --json ;
    archprobe diff org/name mirror/name --files-only
    """

    from archprobe.diff.files import add_files, files_only_doc
    from archprobe.diff.headers import diff_sources

    if files_only:
        doc = files_only_doc(a, b, limit)
    else:
        with shard_progress(not no_progress and not json_out) as progress:
            doc = add_files(diff_sources(a, b, progress=progress, limit=limit), a, b, limit)
    if json_out:
        print_json(doc)
    else:
        from archprobe.cli.render_diff import render_diff

        render_diff(doc)
