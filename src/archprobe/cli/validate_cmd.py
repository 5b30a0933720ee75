"""`archprobe validate SOURCE`: a streamed forward pass through archprobe.nn, checked against a reference."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from archprobe.cli._common import CardOpt, JsonOpt, load_card_opt, print_json


def validate(source: Annotated[str, typer.Argument(help="Local checkpoint folder (config.json + safetensors) or .gguf "
                                                       "file, or a hub repo id (only the needed shards are "
                                                       "downloaded; org/name:TAG picks a GGUF model, sha256-checked)."
                                                  )],
             prompt_ids: Annotated[str | None, typer.Option(help="Comma-separated input token ids.")] = None,
             prompt: Annotated[str | None, typer.Option(help="Input text, tokenized with the checkpoint's "
                                                             "tokenizer.json.")] = None,
             reference: Annotated[str, typer.Option(help="transformers | none")] = "none",
             dtype: Annotated[str, typer.Option(help="float32 (the correctness gate) | bfloat16")] = "float32",
             layers: Annotated[str | None, typer.Option(help="Run only layers 0-N, e.g. 0-3.")] = None,
             save_logits: Annotated[str | None, typer.Option(help="Write the final logits (safetensors, "
                                                                  "tensor 'logits').")] = None,
             pin_routing: Annotated[bool, typer.Option(help="MoE blocks choose experts from the reference's "
                                                            "block input (no false routing flips).")] = False,
             offload_dir: Annotated[str | None, typer.Option(help="Keep each layer's output on disk here "
                                                                  "(long prompts).")] = None,
             card: CardOpt = None,
             generate: Annotated[int, typer.Option(help="Also decode N tokens greedily (ours with the caches, "
                                                        "and the reference's).")] = 0,
             json_out: JsonOpt = False) -> None:
    """Does our understanding hold? Per-layer statistics and final-logit agreement.

    Example: archprobe validate ./tiny-kimi --reference transformers --prompt-ids 1,2,3,4
    """

    from archprobe.cli import options
    from archprobe.errors import ArchprobeError

    if reference not in ("none", "transformers"):
        raise ArchprobeError(f"--reference {reference!r}: use transformers or none")
    options.choice(dtype, ("float32", "bfloat16"), "--dtype")
    ids = None
    if prompt_ids and prompt:
        raise ArchprobeError("give --prompt or --prompt-ids, not both")
    if prompt_ids:
        ids = options.token_ids(prompt_ids)
    # outputs checked before the (long) run, not after it
    save_logits = options.writable_file(save_logits, "--save-logits")
    offload_dir = options.writable_folder(offload_dir, "--offload-dir")
    user_card = load_card_opt(card)
    from archprobe.validate import validate as run_validate  # torch: a missing extra is one line (cli/errors.py)

    progress = None
    if not json_out and sys.stderr.isatty():
        from rich.progress import track

        def progress(it):
            return track(it, description="layers", console=_stderr(), transient=True)

    doc = run_validate(source, ids, reference, dtype, layers, save_logits, progress=progress, prompt=prompt,
                       pin_routing=pin_routing, offload_dir=offload_dir, card=user_card, generate=generate)
    if json_out:
        print_json(doc)
    else:
        _render(doc)
    if doc["status"] == "fail":
        raise typer.Exit(1)


def _stderr():
    from rich.console import Console

    return Console(stderr=True)


def _render(doc: dict) -> None:
    from rich.table import Table

    from archprobe.cli.textsafe import SafeConsole, line
    from archprobe.validate.status import meaning

    c = SafeConsole()
    c.print(line((f"status: {doc['status']}", "bold"), f"  ({meaning(doc['status'])})"))
    c.print(f"  mapped {doc['mapped_tensors']} tensors, unmapped {len(doc['unmapped_tensors'])}, "
            f"peak RSS {doc['peak_rss_bytes'] / 2**20:.0f} MiB")
    for r in doc.get("reasons", []):
        c.print(line("  ", (r, "yellow")))
    for a in doc.get("assumptions", []):
        c.print(line("  ", (a, "yellow")))
    for m in doc["missing_tensors"]:
        c.print(line("  ", (m, "red")))
    t = Table()
    for col in ("layer", "kind", "out rms", "max |x|", "finite", "seconds"):
        t.add_column(col, justify="right")
    for layer in doc["layers"]:
        t.add_row(str(layer["index"]), layer["kind"], f"{layer['out_rms']:.4g}", f"{layer['max_abs']:.4g}",
                  str(layer["finite"]), f"{layer['seconds']:.3f}")
    c.print(t)
    ref = doc["reference"]
    if ref:
        if ref.get("error"):
            c.print(line("reference: ", (ref["error"], "red")))
        else:
            c.print(f"reference {ref['name']}: max |logit diff| {ref['max_abs_diff']:.3g} "
                    f"(logit scale {ref['logit_scale']:.3g}), KL {ref['kl']:.3g}, "
                    f"top-1 agreement {ref['top1_agreement']:.1%}")
    _render_next(c, doc)


def _tok(entry: dict) -> str:
    return repr(entry["token"]) if entry["token"] is not None else f"#{entry['id']}"


def _render_next(c, doc: dict) -> None:
    """The top next tokens side by side, then the greedy continuations."""
    from rich.table import Table

    from archprobe.cli.textsafe import line

    ours = doc.get("next_tokens")
    theirs = (doc.get("reference") or {}).get("next_tokens")
    if ours:
        t = Table(title="next token")
        t.add_column("ours")
        t.add_column("p", justify="right")
        if theirs:
            t.add_column("reference")
            t.add_column("p", justify="right")
        for k, o in enumerate(ours):
            row = [_tok(o), f"{o['prob']:.3f}"]
            if theirs and k < len(theirs):
                row += [_tok(theirs[k]), f"{theirs[k]['prob']:.3f}"]
            t.add_row(*row)
        c.print(t)
    gen = doc.get("generation")
    if gen:
        for who in ("ours", "reference"):
            g = gen.get(who)
            if g is None:
                continue
            shown = g.get("error") or (repr(g["text"]) if g.get("text") is not None else str(g["ids"]))
            c.print(line(f"generated ({who}, {gen['new_tokens']} tokens): ", shown))
        if gen.get("reference"):
            d = gen["first_difference"]
            c.print("greedy continuations agree" if d is None else f"greedy continuations differ from token {d}")
