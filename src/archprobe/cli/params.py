"""Every command-line option that more than one command takes, declared once (typer aliases).

A command names its parameters with these aliases, so `--json`, `--card` or `--tp` read, parse and
explain themselves the same way everywhere; the default value stays in the command's signature
(memory sizes at 4k by default, report at 32k). Values are checked in cli/options.py, output goes
through cli/output.py. tests/cli/test_shell.py keeps it so: a flag two commands share comes from here.
"""

from __future__ import annotations

from typing import Annotated

import typer

_COUNT = dict(min=1, max=1 << 16)     # a parallel size or a page: a positive count

# -- every command
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON (see contracts.md).")]
NoProgressOpt = Annotated[bool, typer.Option("--no-progress", help="No progress bar.")]

# -- a checkpoint and what the user knows better about it
SourceArg = Annotated[str | None, typer.Argument(
    help="Local folder, .safetensors/.gguf file, or hub repo id org/name[@revision][:GGUF_TAG] "
         "(the tag picks one GGUF model of a repo that holds several, e.g. :Q4_K_M). "
         "Omitted: the embedded demo checkpoint.", show_default=False)]
CardOpt = Annotated[str | None, typer.Option(
    "--card", help="An architecture card (archprobe card SOURCE -o card.yaml, edited): its fields override "
                   "what was derived from the shapes.", show_default=False)]
OutOpt = Annotated[str | None, typer.Option(
    "--out", "-o", "--output", help="The file to write (card: .yaml/.yml or .json, default: print YAML; "
                                    "report: default report.html / report.md; eval export: default stdout).",
    show_default=False)]

# -- a forward pass's input (validate, observe, diff --forward)
PromptOpt = Annotated[str | None, typer.Option(
    "--prompt", help="Input text, tokenized with the checkpoint's tokenizer.json (diff --forward: A's).")]
PromptFileOpt = Annotated[str | None, typer.Option(
    "--prompt-file", help="Input text from a UTF-8 file (observe: texts separated by blank lines, default a "
                          "built-in sample of prose, code and French/German).")]
PromptIdsOpt = Annotated[str | None, typer.Option("--prompt-ids", help="Comma-separated input token ids.")]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="float32 (the correctness gate) | bfloat16")]
HtmlOpt = Annotated[str | None, typer.Option("--html", help="Also write a self-contained HTML page here.")]
PlotOpt = Annotated[str | None, typer.Option(
    "--plot", help="Also write a PNG here (memory: memory vs context per device; track show: the panels).")]

# -- sizing (memory, report)
ContextOpt = Annotated[str, typer.Option("--context", "-c", help="Context length: 4096, 32k, 1M.")]
BatchOpt = Annotated[int, typer.Option("--batch", "-b", min=1, max=1 << 24, help="Concurrent sequences.")]
BudgetOpt = Annotated[str | None, typer.Option(
    "--budget", help="Device memory, e.g. 80GB or 8x141GB (N devices of 141GB): memory finds the largest "
                     "context that fits, report draws it on the curve.")]
WeightDtypeOpt = Annotated[str | None, typer.Option(
    "--weight-dtype", help="Re-plan weights at this precision (bf16, fp8, mxfp4, ...); default: as stored.")]
KvDtypeOpt = Annotated[str | None, typer.Option(
    "--kv-dtype", help="KV/latent cache dtype (bf16, fp8); default: the checkpoint's float dtype.")]
GpuOpt = Annotated[str | None, typer.Option(
    "--gpu", help="A named device (h100, h200, b200, mi300x, rtx4090, ...; memory --list-gpus). Without "
                  "--devices: the smallest count that fits.")]
DevicesOpt = Annotated[int | None, typer.Option("--devices", min=1, max=1 << 20, help="Number of devices.")]
TpOpt = Annotated[int | None, typer.Option("--tp", **_COUNT, help="Tensor parallel size.")]
EpOpt = Annotated[int | None, typer.Option("--ep", **_COUNT, help="Expert parallel size.")]
PpOpt = Annotated[int | None, typer.Option("--pp", **_COUNT, help="Pipeline stages.")]
DpOpt = Annotated[int | None, typer.Option("--dp", **_COUNT, help="Data parallel replicas.")]
DcpOpt = Annotated[int | None, typer.Option("--dcp", **_COUNT, help="vLLM decode context parallel (divides --tp).")]
EngineOpt = Annotated[str | None, typer.Option(
    "--engine", help="Engine rules: vllm, sglang, llamacpp (memory also: reference).")]
GpuMemoryUtilizationOpt = Annotated[float | None, typer.Option("--gpu-memory-utilization",
                                                               help="vLLM's share of device memory.")]
MemFractionStaticOpt = Annotated[float | None, typer.Option("--mem-fraction-static",
                                                            help="SGLang's static memory share.")]
BlockSizeOpt = Annotated[int | None, typer.Option("--block-size", **_COUNT, help="KV page size in tokens.")]
MtpOpt = Annotated[bool, typer.Option("--mtp/--no-mtp", help="Load the checkpoint's MTP layers (speculative "
                                                              "decoding).")]

# -- framework releases (adapt, report, track adapt)
IndexUrlOpt = Annotated[str | None, typer.Option(
    "--index-url", help="Package index (PEP 503/691) to read released wheels from; default $PIP_INDEX_URL or "
                        "https://pypi.org/simple.", show_default=False)]
ReleasesOpt = Annotated[int, typer.Option(
    "--releases", help="Newest releases read per framework (older ones only to find the first that registered "
                       "it).")]

# -- the ledger (eval, track)
DEFAULT_LEDGER = "archprobe-ledger.sqlite"
LedgerOpt = Annotated[str, typer.Option("--ledger", help="SQLite ledger file.")]
RunIdOpt = Annotated[str | None, typer.Option(
    "--run-id", help="A run in the ledger (eval run: resume it, only attempts without a final outcome run "
                     "again, or name a new one; eval verify: check only this run).")]
SeedOpt = Annotated[int | None, typer.Option(
    "--seed", help="Base seed (eval run: sample i asks with seed+i; eval standin: its answers).")]
SubjectOpt = Annotated[str | None, typer.Option(
    "--subject", help="What the signals are about (usually the repo id; track adapt: default SOURCE).")]
