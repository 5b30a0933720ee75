"""Root of the `archprobe` CLI: wires the command groups and maps every error to one line (cli/errors.py),
nothing else. Heavy imports happen inside the commands, so `archprobe --help` and `inspect` start
without torch.
"""

from __future__ import annotations

import sys
import warnings

import click
import typer
from typer.core import TyperGroup

from archprobe.cli import (
    adapt_cmd,
    card_cmd,
    eval_cmd,
    inspect_cmd,
    memory_cmd,
    observe_cmd,
    report_cmd,
    track_cmd,
    validate_cmd,
)
from archprobe.cli.diff_cmd import diff as diff_command
from archprobe.cli.errors import debug, describe, one_line


def _kinds(name: str) -> tuple[type, ...]:
    """`name` from click and from typer's vendored copy of it (typer >= 0.17 raises its own classes)."""
    found = []
    for module in ("click.exceptions", "typer._click.exceptions", "typer.exceptions"):
        try:
            kind = getattr(__import__(module, fromlist=[name]), name, None)
        except ImportError:
            kind = None
        if isinstance(kind, type) and kind not in found:
            found.append(kind)
    return tuple(found)


NO_ARGS_IS_HELP, USAGE_ERROR, ABORT = _kinds("NoArgsIsHelpError"), _kinds("ClickException"), _kinds("Abort")


class ArchprobeGroup(TyperGroup):
    """The root command: every command and sub-command runs inside `main` below, so none can forget
    the error mapping; click's own usage errors become one line too (exit 2)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not debug():
            warnings.simplefilter("ignore")   # library warnings are not for the user's stderr
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NO_ARGS_IS_HELP as exc:
            click.echo(exc.ctx.get_help() if getattr(exc, "ctx", None) else "archprobe --help")
            rv = 0
        except USAGE_ERROR as exc:
            click.echo("error: " + one_line(exc.format_message()), err=True)
            rv = 2
        except ABORT:
            click.echo("error: interrupted", err=True)
            rv = 130
        except KeyboardInterrupt:
            click.echo("error: interrupted", err=True)
            rv = 130
        except BrokenPipeError:   # `archprobe ... | head`: the reader left, nothing to say
            sys.stderr.close()
            rv = 0
        except Exception as exc:
            if debug():
                raise
            line, rv = describe(exc)
            click.echo(line, err=True)
        rv = rv if isinstance(rv, int) else 0
        if standalone_mode:
            sys.exit(rv)
        return rv


app = typer.Typer(name="archprobe", help="Read the weights, not the rumors.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False, cls=ArchprobeGroup)
app.command("inspect")(inspect_cmd.inspect)
app.command("demo")(inspect_cmd.demo)
app.command("card")(card_cmd.card)
app.command("memory")(memory_cmd.memory)
app.command("validate")(validate_cmd.validate)
app.command("adapt")(adapt_cmd.adapt)
app.command("report")(report_cmd.report)
app.command("observe")(observe_cmd.observe)
app.command("diff")(diff_command)
app.add_typer(eval_cmd.app, name="eval")
app.add_typer(track_cmd.app, name="track")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
