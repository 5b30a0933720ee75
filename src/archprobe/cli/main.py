"""Root of the `archprobe` CLI: wires the command groups, nothing else. Heavy imports happen inside
the commands, so `archprobe --help` and `inspect` start without torch.
"""

from __future__ import annotations

import typer

from archprobe.cli import adapt_cmd, eval_cmd, inspect_cmd, memory_cmd, report_cmd, track_cmd, validate_cmd

app = typer.Typer(name="archprobe", help="Read the weights, not the rumors.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)
app.command("inspect")(inspect_cmd.inspect)
app.command("demo")(inspect_cmd.demo)
app.command("memory")(memory_cmd.memory)
app.command("validate")(validate_cmd.validate)
app.command("adapt")(adapt_cmd.adapt)
app.command("report")(report_cmd.report)
app.add_typer(eval_cmd.app, name="eval")
app.add_typer(track_cmd.app, name="track")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
